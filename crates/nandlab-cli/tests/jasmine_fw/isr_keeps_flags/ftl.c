/* Test firmware: ftl_open unmasks the all-0xFF read flag (FIRQ_ALL_FF)
 * and its ftl_isr (the shared, empty one) never clears it: the first read
 * of an erased page raises a flash interrupt that, on the board, would be
 * taken again forever. */
#include "jasmine.h"
#include "../common_ftl.c"
void ftl_open(void) {
    SETREG(INTR_MASK, FIRQ_ALL_FF);
    enable_irq();
}
void ftl_write(UINT32 const lba, UINT32 const num_sectors) {
    (void)lba;
    (void)num_sectors;
    nand_page_read(0, 3, 0, WR_BUF_PTR(0));
}
