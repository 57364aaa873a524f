/* peri.h — peripherals: the buffer manager's limit registers and the
 * interrupt sources. */
#ifndef PERI_H
#define PERI_H

#define BM_WRITE_LIMIT (MREG_BASE + 0x00)
#define BM_READ_LIMIT (MREG_BASE + 0x04)
#define BM_STACK_RESET (MREG_BASE + 0x08)
#define BM_STACK_WRSET (MREG_BASE + 0x28)
#define BM_STACK_RDSET (MREG_BASE + 0x2C)

#define INTR_SATA 0x00000001
#define INTR_FLASH 0x00000002
#define INTR_SDRAM 0x00000004
#define INTR_TIMER_1 0x00000100

#endif /* PERI_H */
