/* sata.h — the host interface as the FTL sees it. */
#ifndef SATA_H
#define SATA_H
#define MAX_LBA (NUM_LSECTORS - 1)
#define NCQ_SIZE 32
#define READ 0
#define WRITE 1
typedef struct {
    UINT32 lba;
    UINT32 sector_count;
    UINT32 cmd_type;
} CMD_T;
#define BIT0 0x01
#define BIT1 0x02
#define BIT2 0x04
#define BIT3 0x08
#define BIT4 0x10
#define BIT5 0x20
#define BIT6 0x40
#define BIT7 0x80
#define BIT31 0x80000000
#define SETREGBOR(ADDR, VAL) SETREG((ADDR), GETREG(ADDR) | (UINT32)(VAL))
#define SETREGBND(ADDR, VAL) SETREG((ADDR), GETREG(ADDR) & (UINT32)(VAL))
void send_status_to_host(UINT32 const err_code);
#endif /* SATA_H */
