/* Test firmware: ftl_write waits for one write buffer more than the host
 * fills, polling SATA_WBUF_PTR forever (on the board: a hang). */
#include "jasmine.h"
#include "../common_ftl.c"
void ftl_open(void) {}
void ftl_write(UINT32 const lba, UINT32 const num_sectors) {
    UINT32 pages = (lba % SECTORS_PER_PAGE + num_sectors + SECTORS_PER_PAGE - 1) / SECTORS_PER_PAGE;
    for (UINT32 i = 0; i <= pages; i++) {
        while (g_ftl_write_buf_id == GETREG(SATA_WBUF_PTR))
            ;
        g_ftl_write_buf_id = (g_ftl_write_buf_id + 1) % NUM_WR_BUFFERS;
    }
}
