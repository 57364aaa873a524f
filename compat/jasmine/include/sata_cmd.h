/* sata_cmd.h — the ATA command handlers of the host interface (the layer
 * plays the host interface itself; firmware needs only the types). */
#ifndef SATA_CMD_H
#define SATA_CMD_H
typedef void (*ATA_FUNCTION_T)(UINT32, UINT32);
#endif /* SATA_CMD_H */
