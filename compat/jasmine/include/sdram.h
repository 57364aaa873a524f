/* sdram.h — the DRAM controller (nothing for firmware to do here: the
 * layer's DRAM needs no set-up). */
#ifndef SDRAM_H
#define SDRAM_H
#endif /* SDRAM_H */
