/*
 * ftl_copyback — ftl_minimal writing part of an existing page with one
 * FC_MODIFY_COPYBACK (nand_page_modified_copyback): the old page copied
 * within its bank, the written sectors taken from the host's write
 * buffer, instead of reading the page's other sectors into the write
 * buffer and programming it (see modify_page in ../ftl_minimal/ftl.c).
 */
#define MINIMAL_MODIFIED_COPYBACK 1
#include "../ftl_minimal/ftl.c"
