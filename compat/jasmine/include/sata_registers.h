/* sata_registers.h — the SATA controller's registers the FTLs read: the
 * buffer pointers of the SATA side of the read and write buffers. */
#ifndef SATA_REGISTERS_H
#define SATA_REGISTERS_H
#define SATA_WBUF_BASE (BS_BASE + 0x0170)
#define SATA_RBUF_BASE (BS_BASE + 0x0174)
#define SATA_WBUF_SIZE (BS_BASE + 0x0178)
#define SATA_RBUF_SIZE (BS_BASE + 0x017C)
#define SATA_WBUF_MARGIN (BS_BASE + 0x0180)
#define SATA_RESET_WBUF_PTR (BS_BASE + 0x0184)
#define SATA_RESET_RBUF_PTR (BS_BASE + 0x0188)
#define SATA_WBUF_PTR (BS_BASE + 0x0194) /* next write buffer the host fills */
#define SATA_RBUF_PTR (BS_BASE + 0x0198) /* next read buffer the host takes */
#define SATA_WBUF_FREE (BS_BASE + 0x019C)
#define SATA_RBUF_PENDING (BS_BASE + 0x01A0)
#define SATA_STATUS (BS_BASE + 0x00A0)
#define SATA_SECT_OFFSET (BS_BASE + 0x00A4)
#define SATA_BUF_PAGE_SIZE (BS_BASE + 0x00B4)
#define SATA_MAX_LBA (BS_BASE + 0x01B0)
#endif /* SATA_REGISTERS_H */
