/* misc.h — LED and timers (no effect in nandlab). */
#ifndef MISC_H
#define MISC_H
void led(BOOL32 on);
void led_blink(void);
void test_nand_blocks(void); /* the board's bad-block test: not in nandlab's layer */
void start_interval_measurement(UINT32 const timer, UINT32 const prescale);
void start_timer(UINT32 const timer, UINT32 const prescale, UINT32 const init_val);
#endif /* MISC_H */
