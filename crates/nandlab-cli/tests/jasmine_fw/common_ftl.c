/* What the small test firmwares of tests/jasmine_fw share (each ftl.c
 * includes this): the board's buffer ids, a read that returns zeros, an
 * empty flush and interrupt handler. */
UINT32 g_ftl_read_buf_id;
UINT32 g_ftl_write_buf_id;
/* Every sector reads as zeros. */
void ftl_read(UINT32 const lba, UINT32 const num_sectors) {
    UINT32 pages = (lba % SECTORS_PER_PAGE + num_sectors + SECTORS_PER_PAGE - 1) / SECTORS_PER_PAGE;
    for (UINT32 i = 0; i < pages; i++) {
        mem_set_dram(RD_BUF_PTR(g_ftl_read_buf_id), 0, BYTES_PER_PAGE);
        g_ftl_read_buf_id = (g_ftl_read_buf_id + 1) % NUM_RD_BUFFERS;
        SETREG(BM_STACK_RDSET, g_ftl_read_buf_id);
        SETREG(BM_STACK_RESET, 0x02);
    }
}
void ftl_flush(void) {}
void ftl_isr(void) {}
