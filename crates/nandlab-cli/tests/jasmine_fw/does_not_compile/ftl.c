/* Test firmware: a syntax error (ftl_open lacks a semicolon). */
#include "jasmine.h"
#include "../common_ftl.c"
void ftl_open(void) { g_ftl_read_buf_id = 0 }
void ftl_write(UINT32 const lba, UINT32 const num_sectors) {
    (void)lba;
    (void)num_sectors;
}
