/* peri.h — peripherals: the buffer manager's limit registers and the
 * interrupt sources. */
#ifndef PERI_H
#define PERI_H

#define BM_WRITE_LIMIT (MREG_BASE + 0x00)
#define BM_READ_LIMIT (MREG_BASE + 0x04)
#define BM_STACK_RESET (MREG_BASE + 0x08)
#define BM_STACK_WRSET (MREG_BASE + 0x28)
#define BM_STACK_RDSET (MREG_BASE + 0x2C)

/* The interrupt controller (writes are accepted and forgotten). */
#define APB_ICU_CON (0x85000000 + 0x000)
#define APB_INT_STS (0x85000000 + 0x004)
#define APB_INT_MSK (0x85000000 + 0x00C)
#define APB_PRI_SET1 (0x85000000 + 0x054)
#define APB_PRI_SET2 (0x85000000 + 0x058)

#define INTR_SATA 0x00000001
#define INTR_FLASH 0x00000002
#define INTR_SDRAM 0x00000004
#define INTR_UART_TX 0x00000008
#define INTR_UART_RX 0x00000010
#define INTR_TIMER_4 0x00000020
#define INTR_TIMER_3 0x00000040
#define INTR_TIMER_2 0x00000080
#define INTR_TIMER_1 0x00000100
#define INTR_WATCH_DOG 0x00000200
#define INTR_EXT 0x00000400

#endif /* PERI_H */
