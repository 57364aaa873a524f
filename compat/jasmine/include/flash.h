/* flash.h — the flash controller: command port (FCP_*), bank status
 * ports (BSP_*), command codes and options. In nandlab's layer every
 * register access is a call into the layer (see target.h), and a command
 * issued through FCP_ISSUE runs to completion at once on nandlab's flash. */
#ifndef FLASH_H
#define FLASH_H

#define FLASH_POLL_WR while ((GETREG(WR_STAT) & 0x00000001) != 0)
#define FLASH_ISSUE SETREG(FCP_ISSUE, NULL)

extern UINT8 c_bank_map[NUM_BANKS_MAX];
extern UINT8 c_bank_rmap[NUM_BANKS_MAX];

#define INTR_BSP (FREG_BASE + 0x000)
#define INTR_MASK (FREG_BASE + 0x004)
#define FCONF_NANDCFG_1 (FREG_BASE + 0x008)
#define BANK_RESET (FREG_BASE + 0x00C)
#define FCONF_CHKCMD (FREG_BASE + 0x00A)
#define FCONF_PAUSE (FREG_BASE + 0x010)
#define FCONF_NANDCFG_2 (FREG_BASE + 0x014)
#define FCONF_REBDELAY (FREG_BASE + 0x018)
#define FCONF_TIMECYCLE (FREG_BASE + 0x01C)
#define FCONF_CPBDMABASE (FREG_BASE + 0x020)
#define FCONF_BUFSIZE (FREG_BASE + 0x024)
#define FCONF_COMMAND (FREG_BASE + 0x028)
#define WR_STAT (FREG_BASE + 0x02C)
#define WR_BANK (FREG_BASE + 0x030)
#define CMD_ID_MAX 0x3FF

#define FCP_BASE (FREG_BASE + 0x034)
#define BSP_BASE (FREG_BASE + 0x160)
#define SIZE_OF_BSP 48
#define BSP_INTR_BASE (FREG_BASE + 0x760)
#define BSP_FSM_BASE (FREG_BASE + 0x780)
#define REMAP_BASE (FREG_BASE + 0x7C0)

#define FCP_CMD (FCP_BASE + 0x00)
#define FCP_BANK (FCP_BASE + 0x04)
#define FCP_OPTION (FCP_BASE + 0x08)
#define FCP_DMA_ADDR (FCP_BASE + 0x0C)
#define FCP_DMA_CNT (FCP_BASE + 0x10)
#define FCP_COL (FCP_BASE + 0x14)
#define FCP_ROW0_L (FCP_BASE + 0x18)
#define FCP_ROW0_H (FCP_BASE + 0x1C)
#define FCP_DST_COL (FCP_ROW0_L + NUM_BANKS_MAX * 8 + 0x00)
#define FCP_DST_ROW_L (FCP_ROW0_L + NUM_BANKS_MAX * 8 + 0x04)
#define FCP_DST_ROW_H (FCP_ROW0_L + NUM_BANKS_MAX * 8 + 0x08)
#define FCP_CMD_ID (FCP_ROW0_L + NUM_BANKS_MAX * 8 + 0x0C)
#define FCP_ISSUE (FCP_ROW0_L + NUM_BANKS_MAX * 8 + 0x10)

#define BSP_CHASTAT (FREG_BASE + 0x7A0)
#define MON_CHABANKIDLE (FREG_BASE + 0x7A4)
#define ECC_SEC_FLAG (FREG_BASE + 0x7E4)
#define EDC_SEC_FLAG (FREG_BASE + 0x7E8)

#define _FCP_ROW_L(RBANK) (FCP_ROW0_L + (RBANK) * 8)
#define _FCP_ROW_H(RBANK) (FCP_ROW0_H + (RBANK) * 8)
#define _BSP_CMD(RBANK) (BSP_BASE + 0x00 + SIZE_OF_BSP * (RBANK))
#define _BSP_OPTION(RBANK) (BSP_BASE + 0x04 + SIZE_OF_BSP * (RBANK))
#define _BSP_DMA_ADDR(RBANK) (BSP_BASE + 0x08 + SIZE_OF_BSP * (RBANK))
#define _BSP_DMA_CNT(RBANK) (BSP_BASE + 0x0C + SIZE_OF_BSP * (RBANK))
#define _BSP_COL(RBANK) (BSP_BASE + 0x10 + SIZE_OF_BSP * (RBANK))
#define _BSP_ROW_H(RBANK) (BSP_BASE + 0x14 + SIZE_OF_BSP * (RBANK))
#define _BSP_ROW_L(RBANK) (BSP_BASE + 0x18 + SIZE_OF_BSP * (RBANK))
#define _BSP_DST_COL(RBANK) (BSP_BASE + 0x1C + SIZE_OF_BSP * (RBANK))
#define _BSP_DST_ROW_H(RBANK) (BSP_BASE + 0x20 + SIZE_OF_BSP * (RBANK))
#define _BSP_DST_ROW_L(RBANK) (BSP_BASE + 0x24 + SIZE_OF_BSP * (RBANK))
#define _BSP_CMD_ID(RBANK) (BSP_BASE + 0x28 + SIZE_OF_BSP * (RBANK))
#define _BSP_ECCNUM(RBANK) (BSP_BASE + 0x2C + SIZE_OF_BSP * (RBANK))
/* The per-bank interrupt flags and state machine are read through the
 * layer (a poll the watchdog sees), not through a raw pointer. */
UINT8 jasmine_bsp_intr(UINT32 rbank);
UINT8 jasmine_bsp_fsm(UINT32 rbank);
void jasmine_clr_bsp_intr(UINT32 rbank, UINT32 flags);
#define _BSP_INTR(RBANK) jasmine_bsp_intr(RBANK)
#define _BSP_FSM(RBANK) jasmine_bsp_fsm(RBANK)
#define _CLR_BSP_INTR(RBANK, FLAG) jasmine_clr_bsp_intr((RBANK), (FLAG))

#define REAL_BANK(BANK) ((UINT32)(c_bank_map[BANK]))
#define FCP_ROW_L(BANK) _FCP_ROW_L(REAL_BANK(BANK))
#define FCP_ROW_H(BANK) _FCP_ROW_H(REAL_BANK(BANK))
#define BSP_INTR(BANK) _BSP_INTR(REAL_BANK(BANK))
#define BSP_CMD(BANK) _BSP_CMD(REAL_BANK(BANK))
#define BSP_OPTION(BANK) _BSP_OPTION(REAL_BANK(BANK))
#define BSP_DMA_ADDR(BANK) _BSP_DMA_ADDR(REAL_BANK(BANK))
#define BSP_DMA_CNT(BANK) _BSP_DMA_CNT(REAL_BANK(BANK))
#define BSP_COL(BANK) _BSP_COL(REAL_BANK(BANK))
#define BSP_ROW_H(BANK) _BSP_ROW_H(REAL_BANK(BANK))
#define BSP_ROW_L(BANK) _BSP_ROW_L(REAL_BANK(BANK))
#define BSP_DST_COL(BANK) _BSP_DST_COL(REAL_BANK(BANK))
#define BSP_DST_ROW_H(BANK) _BSP_DST_ROW_H(REAL_BANK(BANK))
#define BSP_DST_ROW_L(BANK) _BSP_DST_ROW_L(REAL_BANK(BANK))
#define BSP_CMD_ID(BANK) _BSP_CMD_ID(REAL_BANK(BANK))
#define BSP_ECCNUM(BANK) _BSP_ECCNUM(REAL_BANK(BANK))
#define BSP_FSM(BANK) _BSP_FSM(REAL_BANK(BANK))
#define CLR_BSP_INTR(BANK, FLAG) _CLR_BSP_INTR(REAL_BANK(BANK), FLAG)

/* Command codes (FCP_CMD). */
#define FC_COL_ROW_IN_PROG 0x01
#define FC_COL_ROW_IN 0x02
#define FC_IN 0x03
#define FC_IN_PROG 0x04
#define FC_PROG 0x09
#define FC_COL_ROW_READ_OUT 0x0a
#define FC_COL_ROW_READ 0x0b
#define FC_OUT 0x0c
#define FC_COL_OUT 0x0f
#define FC_COPYBACK 0x12
#define FC_MODIFY_COPYBACK 0x17
#define FC_WAIT 0x00
#define FC_ERASE 0x14
#define FC_GENERIC 0x15
#define FC_GENERIC_ADDR 0x16
#define FC_READ_ID 0x10

/* Options (FCP_OPTION). */
#define FO_P (0x01 * OPTION_2_PLANE)
#define FO_E 0x06
#define FO_SCRAMBLE 0x08
#define FO_L 0x10
#define FO_H 0x20
#define FO_B_W_DRDY 0x40
#define FO_B_SATA_W 0x80
#define FO_B_SATA_R 0x100
#define AUTO_SEL 0x3F

/* Bank state machine codes (BSP_FSM). */
#define BANK_IDLE 0x0
#define BANK_GRANT 0x1
#define BANK_START 0x2
#define BANK_CHAGET 0x3
#define BANK_WAIT 0x4
#define BANK_CMDEND 0x5
#define BANK_ECCWAIT 0x6
#define BANK_TAKE 0x7
#define BANK_END 0xf

/* Bank interrupt flags (BSP_INTR), cleared only by the firmware. */
#define FIRQ_CORRECTED 0x01
#define FIRQ_CRC_FAIL 0x02
#define FIRQ_MISMATCH 0x04
#define FIRQ_BADBLK_L 0x08
#define FIRQ_BADBLK_H 0x10
#define FIRQ_ALL_FF 0x20
#define FIRQ_ECC_FAIL 0x80
#define FIRQ_DATA_CORRUPT 0x82

#define RETURN_ON_ISSUE 0
#define RETURN_ON_ACCEPT 1
#define RETURN_WHEN_DONE 2

void flash_reset(void);
void flash_issue_cmd(UINT32 const bank, UINT32 const sync);
void flash_finish(void);
void flash_copy(UINT32 const bank, UINT32 const dst_row, UINT32 const src_row);
void flash_erase(UINT32 const bank, UINT16 const vblk_offset);
void flash_clear_irq(void);

void nand_page_read(UINT32 const bank, UINT32 const vblock, UINT32 const page_num, UINT32 const buf_addr);
void nand_page_ptread(UINT32 const bank, UINT32 const vblock, UINT32 const page_num, UINT32 const sect_offset,
                      UINT32 const num_sectors, UINT32 const buf_addr, UINT32 const issue_flag);
void nand_page_read_to_host(UINT32 const bank, UINT32 const vblock, UINT32 const page_num);
void nand_page_ptread_to_host(UINT32 const bank, UINT32 const vblock, UINT32 const page_num, UINT32 const sect_offset,
                              UINT32 const num_sectors);
void nand_page_program(UINT32 const bank, UINT32 const vblock, UINT32 const page_num, UINT32 const buf_addr);
void nand_page_ptprogram(UINT32 const bank, UINT32 const vblock, UINT32 const page_num, UINT32 const sect_offset,
                         UINT32 const num_sectors, UINT32 const buf_addr);
void nand_page_program_from_host(UINT32 const bank, UINT32 const vblock, UINT32 const page_num);
void nand_page_ptprogram_from_host(UINT32 const bank, UINT32 const vblock, UINT32 const page_num,
                                   UINT32 const sect_offset, UINT32 const num_sectors);
void nand_page_copyback(UINT32 const bank, UINT32 const src_vblock, UINT32 const src_page, UINT32 const dst_vblock,
                        UINT32 const dst_page);
void nand_page_modified_copyback(UINT32 const bank, UINT32 const src_vblock, UINT32 const src_page,
                                 UINT32 const dst_vblock, UINT32 const dst_page, UINT32 const sect_offset,
                                 UINT32 dma_addr, UINT32 const dma_count);
void nand_block_erase(UINT32 const bank, UINT32 const vblock);
void nand_block_erase_sync(UINT32 const bank, UINT32 const vblock);

#endif /* FLASH_H */
