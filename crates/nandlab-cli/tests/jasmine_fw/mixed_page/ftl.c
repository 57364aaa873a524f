/* Test firmware: ftl_write writes a word of its own into the host's write
 * buffer and programs the page from it: host sectors and firmware bytes
 * in one page, which the layer reports. */
#include "jasmine.h"
#include "../common_ftl.c"
void ftl_open(void) {}
void ftl_write(UINT32 const lba, UINT32 const num_sectors) {
    (void)num_sectors;
    UINT32 offset = lba % SECTORS_PER_PAGE;
    UINT32 other = offset == 0 ? SECTORS_PER_PAGE - 1 : 0;
    write_dram_32(WR_BUF_PTR(g_ftl_write_buf_id) + other * BYTES_PER_SECTOR, 0x12345678);
    nand_page_program(0, 3, 0, WR_BUF_PTR(g_ftl_write_buf_id));
}
