/* bank.h — banks: nandlab's Jasmine has JASMINE_NUM_BANKS banks, bank i
 * being real bank i (c_bank_map is the identity). */
#ifndef BANK_H
#define BANK_H

#define NUM_BANKS JASMINE_NUM_BANKS
#if NUM_BANKS < 1 || NUM_BANKS > NUM_BANKS_MAX
#error "JASMINE_NUM_BANKS must be 1 to 32"
#endif

#endif /* BANK_H */
