/* shashtbl.h — the board library's small static hash table, one per bank
 * (ftl_faster maps data pages to log pages with it). Nodes and buckets
 * live in DRAM where the firmware's ftl.h puts them (HASH_NODE_ADDR,
 * HASH_BUCKET_ADDR); links are 32-bit DRAM addresses, as on the board.
 * The layer ships its own implementation (src/shashtbl.c). */
#ifndef SHASHTBL_H
#define SHASHTBL_H

typedef UINT32 hashnode_ptr; /* DRAM address of a node, 0 for none */

typedef struct {
    UINT32 key;
    UINT32 data;
    hashnode_ptr next;
} hashnode;

typedef struct {
    UINT32 num_elmts;           /* nodes ever taken from the node area */
    hashnode_ptr free_node_pool; /* removed nodes, linked through next */
} SHASHTBL;

extern SHASHTBL g_shashtbl[NUM_BANKS];

void shashtbl_init(void);
void shashtbl_insert(UINT32 const bank, UINT32 const key, UINT32 const data);
void shashtbl_remove(UINT32 const bank, UINT32 const key);
void shashtbl_update(UINT32 const bank, UINT32 const key, UINT32 const new_val);
UINT32 shashtbl_get(UINT32 const bank, UINT32 const key);

#endif /* SHASHTBL_H */
