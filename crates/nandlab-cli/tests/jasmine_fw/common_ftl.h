/* The DRAM layout of the small test firmwares in tests/jasmine_fw (each
 * ftl.h includes this): read and write buffers only. */
#ifndef FTL_H
#define FTL_H
#define NUM_RW_BUFFERS ((DRAM_SIZE / 2) / BYTES_PER_PAGE)
#define NUM_RD_BUFFERS (NUM_RW_BUFFERS / 2)
#define NUM_WR_BUFFERS (NUM_RW_BUFFERS - NUM_RD_BUFFERS)
#define RD_BUF_ADDR DRAM_BASE
#define WR_BUF_ADDR (RD_BUF_ADDR + NUM_RD_BUFFERS * BYTES_PER_PAGE)
#define RD_BUF_PTR(ID) (RD_BUF_ADDR + ((UINT32)(ID)) * BYTES_PER_PAGE)
#define WR_BUF_PTR(ID) (WR_BUF_ADDR + ((UINT32)(ID)) * BYTES_PER_PAGE)
void ftl_open(void);
void ftl_read(UINT32 const lba, UINT32 const num_sectors);
void ftl_write(UINT32 const lba, UINT32 const num_sectors);
void ftl_flush(void);
void ftl_isr(void);
#endif
