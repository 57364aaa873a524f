/* mem_util.h — the memory utility engine (set, copy, bitmap find, search)
 * and DRAM accessors. The layer implements them on the emulated DRAM and
 * SRAM and keeps each DRAM sector's payload identity (docs/jasmine.md). */
#ifndef MEM_UTIL_H
#define MEM_UTIL_H

extern UINT8 g_temp_mem[BYTES_PER_SECTOR];

/* Addresses pass as pointer-sized integers: on the board they are 32-bit,
 * here firmware globals live above 4 GiB, so the layer never truncates. */
#define JASMINE_ADDR(A) ((unsigned long)(A))
#define mem_set_sram(ADDR, VAL, BYTES) _mem_set_sram(JASMINE_ADDR(ADDR), (UINT32)(VAL), (UINT32)(BYTES))
#define mem_set_dram(ADDR, VAL, BYTES) _mem_set_dram(JASMINE_ADDR(ADDR), (UINT32)(VAL), (UINT32)(BYTES))
#define mem_copy(DST, SRC, BYTES) _mem_copy((void *)JASMINE_ADDR(DST), (void *)JASMINE_ADDR(SRC), (UINT32)(BYTES))
#define mem_bmp_find_sram(BMP, BYTES, VAL) _mem_bmp_find_sram((void *)JASMINE_ADDR(BMP), (UINT32)(BYTES), (UINT32)(VAL))
#define mem_bmp_find_dram(BMP, BYTES, VAL) _mem_bmp_find_dram((void *)JASMINE_ADDR(BMP), (UINT32)(BYTES), (UINT32)(VAL))
#define mem_search_min_max(ADDR, UNIT, SIZE, CMD) \
    _mem_search_min_max((void *)JASMINE_ADDR(ADDR), (UINT32)(UNIT), (UINT32)(SIZE), (UINT32)(CMD))
#define mem_search_equ(ADDR, UNIT, SIZE, CMD, VAL) \
    _mem_search_equ((void *)JASMINE_ADDR(ADDR), (UINT32)(UNIT), (UINT32)(SIZE), (UINT32)(CMD), (UINT32)(VAL))
#define mem_search_equ_sram(ADDR, UNIT, SIZE, VAL) mem_search_equ(ADDR, UNIT, SIZE, MU_CMD_SEARCH_EQU_SRAM, VAL)
#define mem_search_equ_dram(ADDR, UNIT, SIZE, VAL) mem_search_equ(ADDR, UNIT, SIZE, MU_CMD_SEARCH_EQU_DRAM, VAL)
#define mem_cmp_sram(ADDR1, ADDR2, BYTES) _mem_cmp_sram((void *)JASMINE_ADDR(ADDR1), (void *)JASMINE_ADDR(ADDR2), (BYTES))
#define mem_cmp_dram(ADDR1, ADDR2, BYTES) _mem_cmp_dram((void *)JASMINE_ADDR(ADDR1), (void *)JASMINE_ADDR(ADDR2), (BYTES))

void _mem_set_sram(unsigned long addr, UINT32 const val, UINT32 bytes);
void _mem_set_dram(unsigned long addr, UINT32 const val, UINT32 bytes);
void _mem_copy(void *const dst, const void *const src, UINT32 const bytes);
UINT32 _mem_bmp_find_sram(const void *const bitmap, UINT32 const bytes, UINT32 const val);
UINT32 _mem_bmp_find_dram(const void *const bitmap, UINT32 const bytes, UINT32 const val);
UINT32 _mem_search_min_max(const void *const addr, UINT32 const unit, UINT32 const size, UINT32 const cmd);
UINT32 _mem_search_equ(const void *const addr, UINT32 const unit, UINT32 const size, UINT32 const cmd,
                       UINT32 const val);
UINT32 _mem_cmp_sram(const void *const addr1, const void *const addr2, const UINT32 bytes);
UINT32 _mem_cmp_dram(const void *const addr1, const void *const addr2, const UINT32 bytes);

/* Loads from DRAM change nothing the layer tracks: plain loads, inline
 * (a load outside the board's memory faults and is reported). */
#define read_dram_8(ADDR) (*(volatile UINT8 *)JASMINE_ADDR(ADDR))
#define read_dram_16(ADDR) (*(volatile UINT16 *)JASMINE_ADDR(ADDR))
#define read_dram_32(ADDR) (*(volatile UINT32 *)JASMINE_ADDR(ADDR))
#define write_dram_8(ADDR, VAL) _write_dram_8(JASMINE_ADDR(ADDR), (UINT8)(VAL))
#define write_dram_16(ADDR, VAL) _write_dram_16(JASMINE_ADDR(ADDR), (UINT16)(VAL))
#define write_dram_32(ADDR, VAL) _write_dram_32(JASMINE_ADDR(ADDR), (UINT32)(VAL))
#define set_bit_dram(BASE_ADDR, BIT_OFFSET) _set_bit_dram(JASMINE_ADDR(BASE_ADDR), (UINT32)(BIT_OFFSET))
#define clr_bit_dram(BASE_ADDR, BIT_OFFSET) _clr_bit_dram(JASMINE_ADDR(BASE_ADDR), (UINT32)(BIT_OFFSET))
#define tst_bit_dram(BASE_ADDR, BIT_OFFSET) _tst_bit_dram(JASMINE_ADDR(BASE_ADDR), (UINT32)(BIT_OFFSET))

UINT8 _read_dram_8(unsigned long const addr);
UINT16 _read_dram_16(unsigned long const addr);
UINT32 _read_dram_32(unsigned long const addr);
void _write_dram_8(unsigned long const addr, UINT8 const val);
void _write_dram_16(unsigned long const addr, UINT16 const val);
void _write_dram_32(unsigned long const addr, UINT32 const val);
void _set_bit_dram(unsigned long const base_addr, UINT32 const bit_offset);
void _clr_bit_dram(unsigned long const base_addr, UINT32 const bit_offset);
BOOL32 _tst_bit_dram(unsigned long const base_addr, UINT32 const bit_offset);

#define set_bit_sram(BITMAP, OFFSET) *(((UINT8 *)(BITMAP) + (OFFSET) / 8)) |= 1 << ((OFFSET) % 8)
#define clr_bit_sram(BITMAP, OFFSET) *(((UINT8 *)(BITMAP) + (OFFSET) / 8)) &= ~(1 << ((OFFSET) % 8))
#define tst_bit_sram(BITMAP, OFFSET) ((*(((UINT8 *)(BITMAP)) + (OFFSET) / 8) & (1 << ((OFFSET) % 8))) != 0)

#define MU_SRC_ADDR (MREG_BASE + 0x10)
#define MU_DST_ADDR (MREG_BASE + 0x14)
#define MU_VALUE (MREG_BASE + 0x18)
#define MU_SIZE (MREG_BASE + 0x1C)
#define MU_RESULT (MREG_BASE + 0x20)
#define MU_CMD (MREG_BASE + 0x24)
#define MU_UNITSTEP (MREG_BASE + 0x30)

#define MU_CMD_SET_REPT_SRAM 0x000
#define MU_CMD_SET_REPT_DRAM 0x040
#define MU_CMD_COPY 0x001
#define MU_CMD_FIND_SRAM 0x002
#define MU_CMD_FIND_DRAM 0x042
#define MU_CMD_SEARCH_MAX_SRAM 0x103
#define MU_CMD_SEARCH_MIN_SRAM 0x083
#define MU_CMD_SEARCH_EQU_SRAM 0x003
#define MU_CMD_SEARCH_MAX_DRAM 0x143
#define MU_CMD_SEARCH_MIN_DRAM 0x0C3
#define MU_CMD_SEARCH_EQU_DRAM 0x043
#define MU_MAX_BYTES 32768
#define SDRAM_ECC_UNIT 128
#define MU_UNIT_8 (0 << 8)
#define MU_UNIT_16 (1 << 8)
#define MU_UNIT_32 (2 << 8)

#endif /* MEM_UTIL_H */
