/* Test firmware: calls a board function (declared in misc.h) that
 * nandlab's Jasmine layer does not implement. */
#include "jasmine.h"
#include "../common_ftl.c"
void ftl_open(void) { test_nand_blocks(); }
void ftl_write(UINT32 const lba, UINT32 const num_sectors) {
    (void)lba;
    (void)num_sectors;
}
