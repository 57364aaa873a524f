/*
 * shashtbl.c — the board library's static hash table (shashtbl.h), for a
 * firmware whose ftl.h includes shashtbl.h and lays out its DRAM areas
 * (HASH_BUCKET_ADDR, HASH_NODE_ADDR, HASH_BUCKET_SIZE, LOG_BLK_PER_BANK,
 * ISOL_BLK_PER_BANK: ftl_faster). Chained buckets of 32-bit node
 * addresses; a new node is the next unused one of the bank's node area,
 * or one from the bank's free list. get returns INVALID for a missing key.
 */
#include "layer.h"

#if defined(SHASHTBL_H) && defined(HASH_BUCKET_ADDR) && defined(HASH_NODE_ADDR)

SHASHTBL g_shashtbl[NUM_BANKS];

#define NODES_PER_BANK ((LOG_BLK_PER_BANK + ISOL_BLK_PER_BANK) * PAGES_PER_BLK)

static UINT32 bucket_addr(UINT32 bank, UINT32 key) {
    UINT32 h = key * 2654435761u; /* Knuth's multiplicative hash */
    return HASH_BUCKET_ADDR + (bank * HASH_BUCKET_SIZE + (h >> 7) % HASH_BUCKET_SIZE) * sizeof(hashnode_ptr);
}

void shashtbl_init(void) {
    for (UINT32 bank = 0; bank < NUM_BANKS; bank++) {
        g_shashtbl[bank].num_elmts = 0;
        g_shashtbl[bank].free_node_pool = 0;
    }
    mem_set_dram(HASH_NODE_ADDR, 0, HASH_NODE_BYTES);
    mem_set_dram(HASH_BUCKET_ADDR, 0, HASH_BUCKET_BYTES);
}

static hashnode_ptr find(UINT32 bank, UINT32 key) {
    hashnode_ptr node = read_dram_32(bucket_addr(bank, key));
    while (node) {
        if (read_dram_32(node) == key) return node;
        node = read_dram_32(node + 8);
    }
    return 0;
}

void shashtbl_insert(UINT32 const bank, UINT32 const key, UINT32 const data) {
    SHASHTBL *t = &g_shashtbl[bank];
    hashnode_ptr node;
    if (t->free_node_pool) {
        node = t->free_node_pool;
        t->free_node_pool = read_dram_32(node + 8);
    } else {
        if (t->num_elmts >= NODES_PER_BANK)
            jasmine_fatal(JASMINE_E_LAYER, "shashtbl_insert: bank %u's %u hash nodes are all in use", bank,
                          (unsigned)NODES_PER_BANK);
        node = HASH_NODE_ADDR + (bank * NODES_PER_BANK + t->num_elmts) * sizeof(hashnode);
        t->num_elmts++;
    }
    UINT32 bucket = bucket_addr(bank, key);
    write_dram_32(node, key);
    write_dram_32(node + 4, data);
    write_dram_32(node + 8, read_dram_32(bucket));
    write_dram_32(bucket, node);
}

UINT32 shashtbl_get(UINT32 const bank, UINT32 const key) {
    hashnode_ptr node = find(bank, key);
    return node ? read_dram_32(node + 4) : INVALID;
}

void shashtbl_update(UINT32 const bank, UINT32 const key, UINT32 const new_val) {
    hashnode_ptr node = find(bank, key);
    if (node) write_dram_32(node + 4, new_val);
}

void shashtbl_remove(UINT32 const bank, UINT32 const key) {
    UINT32 link = bucket_addr(bank, key);
    hashnode_ptr node = read_dram_32(link);
    while (node) {
        if (read_dram_32(node) == key) {
            write_dram_32(link, read_dram_32(node + 8));
            write_dram_32(node + 8, g_shashtbl[bank].free_node_pool);
            g_shashtbl[bank].free_node_pool = node;
            return;
        }
        link = node + 8;
        node = read_dram_32(link);
    }
}

#endif
