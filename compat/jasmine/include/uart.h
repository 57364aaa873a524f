/* uart.h — the debug UART. As on the board with OPTION_UART_DEBUG = 0,
 * the print calls compile to nothing; define JASMINE_UART=1 at build time
 * to have them write to nandlab's standard error. */
#ifndef UART_H
#define UART_H
#if defined(JASMINE_UART) && JASMINE_UART
void uart_init(void);
void uart_print(const char *string);
void uart_print_32(UINT32 num);
void uart_print_hex(UINT32 num);
void uart_printf(const char *msg, ...);
#else
#define uart_init(X)
#define uart_print(X)
#define uart_print_32(X)
#define uart_print_hex(X)
#define uart_print_hexa(X)
#define uart_printf(fmt, ...)
#endif
#endif /* UART_H */
