/* target.h — the board's address map and register access. DRAM and SRAM
 * are real memory at their board addresses (the layer maps them in the
 * low 4 GiB); the controllers' registers (flash, memory utility and
 * buffer manager, SATA) are not memory: SETREG and GETREG call the layer,
 * which acts on a write (FCP_ISSUE runs a flash command) and watches
 * polls that never end. */
#ifndef TARGET_H
#define TARGET_H

#define DRAM_BASE 0x40000000
#define FREG_BASE 0x60000000
#define MREG_BASE 0x50000000
#define BS_BASE 0x70000000
#define GPIO_BASE 0x83000000
#define SRAM_BASE 0x10000000
#define ROM_BASE 0x10000000
#define SRAM_SIZE (96 * 1024)

void jasmine_setreg(UINT32 addr, UINT32 val);
UINT32 jasmine_getreg(UINT32 addr);
#define SETREG(ADDR, VAL) jasmine_setreg((UINT32)(ADDR), (UINT32)(VAL))
#define GETREG(ADDR) jasmine_getreg((UINT32)(ADDR))

#include "peri.h"
#include "sdram.h"

#define EQ_SIZE 128
#define EQ_MARGIN 4

UINT32 disable_irq(void);
void enable_irq(void);
UINT32 disable_fiq(void);
void enable_fiq(void);
void enable_interrupt(void);
void disable_interrupt(void);

#define ASSERT(X)

#endif /* TARGET_H */
