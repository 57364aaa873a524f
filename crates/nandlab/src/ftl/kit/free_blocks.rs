//! A pool of free (erased) blocks per plane, for the block-mapped FTLs
//! (`block`, `hybrid`).
//!
//! Blocks are reused oldest-erased first on each plane (a FIFO: basic
//! dynamic wear leveling). A block is taken on the plane the caller asks
//! for when that plane has one (so a merge can copy pages by copyback,
//! which stays within a plane), otherwise from the next plane in turn, in
//! the data plane's striping order (channel → chip → die → plane, see
//! `data_plane::unit_order`), so consecutive new blocks land on
//! different channels first.

use crate::flash::{Cause, Flash, FlashError};
use crate::ftl::FtlError;
use crate::nand::{BlockAddr, FastDiv, Geometry};
use std::collections::VecDeque;

/// Erase `block` to reuse it: `Ok(true)` when erased, `Ok(false)` when the
/// erase failed (media reliability: the block is a grown bad block now,
/// which a mount's bad-block scan skips; the caller retires it and never
/// uses it again).
pub fn erase_for_reuse(flash: &mut dyn Flash, block: u32, cause: Cause) -> Result<bool, FtlError> {
    match flash.erase(cause, BlockAddr(u64::from(block))) {
        Ok(()) => Ok(true),
        Err(FlashError::EraseFailed) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Add the `retired_blocks` metric to an FTL's stats when it retired any
/// (absent otherwise, so reports without media failures are unchanged).
pub fn insert_retired_blocks(extra: &mut std::collections::BTreeMap<String, serde_json::Value>, retired: u64) {
    if retired > 0 {
        extra.insert("retired_blocks".into(), serde_json::json!(retired));
    }
}

/// Free blocks per plane. See the module docs.
#[derive(Clone, Debug)]
pub struct FreeBlockPool {
    per_plane: Vec<VecDeque<u32>>,
    /// Free blocks on all planes.
    total: u32,
    /// Planes in striping order, and the place in it of the plane a block
    /// was last taken from when the caller named none.
    plane_order: Vec<u32>,
    next_plane: u32,
    blocks_per_plane: FastDiv,
}

impl FreeBlockPool {
    /// An empty pool for the planes of `geometry`.
    pub fn new(geometry: &Geometry) -> FreeBlockPool {
        let unit_of_plane = super::data_plane::unit_order(geometry);
        let mut plane_order: Vec<u32> = (0..geometry.planes()).collect();
        plane_order.sort_by_key(|&p| unit_of_plane[p as usize]);
        FreeBlockPool {
            per_plane: vec![VecDeque::new(); geometry.planes() as usize],
            total: 0,
            plane_order,
            next_plane: 0,
            blocks_per_plane: FastDiv::new(geometry.blocks_per_plane()),
        }
    }

    /// Empty the pool and start the planes' turn over (a format or mount).
    pub fn clear(&mut self) {
        self.per_plane.iter_mut().for_each(VecDeque::clear);
        self.total = 0;
        self.next_plane = 0;
    }

    /// Add an erased block (after the others of its plane).
    pub fn push(&mut self, block: u32) {
        let plane = self.blocks_per_plane.quotient(block) as usize;
        self.per_plane[plane].push_back(block);
        self.total += 1;
    }

    /// Take the oldest free block of `plane` if it has one, else of the
    /// next plane in turn that has one; `None` if the pool is empty.
    pub fn pop(&mut self, plane: Option<u32>) -> Option<u32> {
        if let Some(p) = plane {
            if let Some(b) = self.per_plane[p as usize].pop_front() {
                self.total -= 1;
                return Some(b);
            }
        }
        let planes = self.plane_order.len() as u32;
        for _ in 0..planes {
            self.next_plane = (self.next_plane + 1) % planes;
            let p = self.plane_order[self.next_plane as usize] as usize;
            if let Some(b) = self.per_plane[p].pop_front() {
                self.total -= 1;
                return Some(b);
            }
        }
        None
    }

    /// Free blocks on all planes.
    pub fn len(&self) -> u32 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}
