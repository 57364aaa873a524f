/* rom.h — the boot ROM (not used by an FTL). */
#ifndef ROM_H
#define ROM_H
#endif /* ROM_H */
