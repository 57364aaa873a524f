/*
 * jasmine.h — the OpenSSD Jasmine board API, as nandlab's compatibility
 * layer provides it (written for nandlab from the API's definitions; see
 * docs/jasmine.md). A firmware tree includes this header exactly as on the
 * board; as on the board it includes the firmware's own "ftl.h".
 *
 * The geometry is fixed at build time by `nandlab jasmine build`, which
 * passes it as -D options (JASMINE_NUM_BANKS, JASMINE_VBLKS_PER_BANK,
 * JASMINE_PAGES_PER_VBLK, JASMINE_SECTORS_PER_PAGE, JASMINE_NUM_LSECTORS,
 * JASMINE_SPARE_VBLKS_PER_BANK); the defaults below are the `vst-jasmine`
 * preset (the board in single-plane mode).
 */
#ifndef JASMINE_H
#define JASMINE_H

#ifndef JASMINE_NUM_BANKS
#define JASMINE_NUM_BANKS 8
#endif
#ifndef JASMINE_VBLKS_PER_BANK
#define JASMINE_VBLKS_PER_BANK 4152
#endif
#ifndef JASMINE_PAGES_PER_VBLK
#define JASMINE_PAGES_PER_VBLK 128
#endif
#ifndef JASMINE_SECTORS_PER_PAGE
#define JASMINE_SECTORS_PER_PAGE 32
#endif
#ifndef JASMINE_SPARE_VBLKS_PER_BANK
#define JASMINE_SPARE_VBLKS_PER_BANK 56
#endif

/* Board constants (the same values as the board's configuration). */
#define DRAM_SIZE 65075200
#define CLOCK_SPEED 175000000
#define OPTION_2_PLANE 0 /* nandlab's Jasmine is single-plane: a page is one row of one bank */
#define OPTION_ENABLE_ASSERT 0
#define OPTION_FTL_TEST 0
#define OPTION_UART_DEBUG 0
#define OPTION_SLOW_SATA 0
#define OPTION_SUPPORT_NCQ 0
#define OPTION_REDUCED_CAPACITY 0

#define CHN_WIDTH 2
#define NUM_CHNLS_MAX 4
#define BANKS_PER_CHN_MAX 8
#define NUM_BANKS_MAX 32

#include "nand.h"

#define BYTES_PER_SECTOR 512

#define NUM_PSECTORS_8GB 16777216
#define NUM_PSECTORS_16GB (NUM_PSECTORS_8GB * 2)
#define NUM_PSECTORS_32GB (NUM_PSECTORS_16GB * 2)
#define NUM_PSECTORS_64GB (NUM_PSECTORS_32GB * 2)
#define NUM_PSECTORS_128GB (NUM_PSECTORS_64GB * 2)

#define PHYPAGES_PER_PAGE CHN_WIDTH
#define SECTORS_PER_PAGE (SECTORS_PER_PHYPAGE * PHYPAGES_PER_PAGE)
#define SECTORS_PER_SMALL_PAGE (SECTORS_PER_PHYPAGE * CHN_WIDTH)
#define BYTES_PER_PHYPAGE (BYTES_PER_SECTOR * SECTORS_PER_PHYPAGE)
#define BYTES_PER_PAGE (BYTES_PER_SECTOR * SECTORS_PER_PAGE)
#define BYTES_PER_PAGE_EXT ((BYTES_PER_PHYPAGE + SPARE_PER_PHYPAGE) * PHYPAGES_PER_PAGE)
#define BYTES_PER_SMALL_PAGE (BYTES_PER_PHYPAGE * CHN_WIDTH)
#define PAGES_PER_BLK PAGES_PER_VBLK
#define VBLKS_PER_BANK PBLKS_PER_BANK
#define SPARE_VBLKS_PER_BANK SPARE_PBLKS_PER_BANK
#define SECTORS_PER_VBLK (SECTORS_PER_PAGE * PAGES_PER_VBLK)
#define BYTES_PER_VBLK (BYTES_PER_SECTOR * SECTORS_PER_VBLK)
#define PAGES_PER_BANK (PAGES_PER_VBLK * VBLKS_PER_BANK)
#define SECTORS_PER_BANK (SECTORS_PER_PAGE * PAGES_PER_BANK)
#define BYTES_PER_BANK ((UINT64)BYTES_PER_PAGE * PAGES_PER_BANK)
#define NUM_VBLKS (VBLKS_PER_BANK * NUM_BANKS)
#define NUM_VPAGES (PAGES_PER_VBLK * NUM_VBLKS)
#define NUM_PSECTORS (SECTORS_PER_VBLK * ((VBLKS_PER_BANK - SPARE_VBLKS_PER_BANK) * NUM_BANKS))
#ifdef JASMINE_NUM_LSECTORS
#define NUM_LSECTORS JASMINE_NUM_LSECTORS
#else
#define NUM_LSECTORS (NUM_PSECTORS / 100 * 93) /* the board's 7 % over-provisioning */
#endif
#define NUM_LPAGES ((NUM_LSECTORS + SECTORS_PER_PAGE - 1) / SECTORS_PER_PAGE)
#define ROWS_PER_PBLK PAGES_PER_VBLK
#define ROWS_PER_BANK (ROWS_PER_PBLK * PBLKS_PER_BANK)

/* Block 0 of every bank: the installer's scan list and stamp, then the
 * firmware image. */
#define BYTES_PER_FW_PAGE 2048
#define SECTORS_PER_FW_PAGE (BYTES_PER_FW_PAGE / BYTES_PER_SECTOR)
#define SCAN_LIST_PAGE_OFFSET 0
#define STAMP_PAGE_OFFSET 4
#define FW_PAGE_OFFSET 5

#define FLASH_ID_BYTES 5
#define DRAM_ECC_UNIT 128

#ifdef TRUE
#undef TRUE
#endif
#ifdef FALSE
#undef FALSE
#endif
#ifdef NULL
#undef NULL
#endif
#define TRUE 1
#define FALSE 0
#define NULL 0 /* an integer, as the firmware expects */
#define OK TRUE
#define FAIL FALSE
#define INVALID 0xABABABAB
#define INVALID8 ((UINT8)-1)
#define INVALID16 ((UINT16)-1)
#define INVALID32 ((UINT32)-1)

typedef unsigned char BOOL8;
typedef unsigned short BOOL16;
typedef unsigned int BOOL32;
typedef unsigned char UINT8;
typedef unsigned short UINT16;
typedef unsigned int UINT32;
typedef unsigned long long UINT64;

#define MIN(X, Y) ((X) > (Y) ? (Y) : (X))
#define MAX(X, Y) ((X) > (Y) ? (X) : (Y))

void delay(UINT32 const count);

#include "flash.h"
#include "sata.h"
#include "sata_cmd.h"
#include "sata_registers.h"
#include "mem_util.h"
#include "target.h"
#include "bank.h"

#define SCAN_LIST_SIZE BYTES_PER_SMALL_PAGE
#define SCAN_LIST_ITEMS ((SCAN_LIST_SIZE / sizeof(UINT16)) - 1)
typedef struct {
    UINT16 num_entries;
    UINT16 list[SCAN_LIST_ITEMS];
} scan_list_t;

#include "ftl.h"
#include "misc.h"
#include "uart.h"

#endif /* JASMINE_H */
