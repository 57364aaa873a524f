/* Test firmware: ftl_write stores a word past the end of the board's
 * DRAM. */
#include "jasmine.h"
#include "../common_ftl.c"
void ftl_open(void) {}
void ftl_write(UINT32 const lba, UINT32 const num_sectors) {
    (void)lba;
    (void)num_sectors;
    write_dram_32(DRAM_BASE + DRAM_SIZE + 0x1000, 1);
}
