//! Where the data plane's allocation units and block groups are on the
//! device, and which of their blocks are usable.
//!
//! A *unit* is a plane, or a die when the FTL programs the planes of a die
//! together; units are numbered in striping order (channel → chip → die
//! [→ plane]) so that consecutive units are on different channels first.
//! A *group* is a set of blocks of one unit at the same block offset, one
//! per plane of the unit: a group of one block when the unit is a plane.
//! Group `g` of the unit on physical plane-or-die `p` at block offset `o`
//! is `g = p × blocks_per_plane + o`; its member on plane `k` of the unit
//! is block `(p × planes_per_group + k) × blocks_per_plane + o`. A group's
//! *members* are its good blocks (factory bad and failed blocks are left
//! out), so a group with a bad block is narrower, and one with no good
//! block is never used.

use crate::nand::{FastDiv, Geometry};

/// Unit index of each linear plane: units run channel → chip → die → plane,
/// so unit `i` is on channel `i % channels`.
pub(crate) fn unit_order(g: &Geometry) -> Vec<u32> {
    striping_order(g, false)
}

/// Unit index of each linear plane (`per_die` false) or die (`per_die` true), in
/// channel → chip → die [→ plane] order.
pub(super) fn striping_order(g: &Geometry, per_die: bool) -> Vec<u32> {
    let planes = if per_die { 1 } else { g.planes_per_die() };
    let mut unit_of = vec![0; (g.dies() * planes) as usize];
    let mut unit = 0;
    for plane in 0..planes {
        for die in 0..g.dies_per_chip() {
            for chip in 0..g.chips_per_channel() {
                for channel in 0..g.channels() {
                    let linear = g.plane_index(channel, chip, die, plane) / (g.planes_per_die() / planes);
                    unit_of[linear as usize] = unit;
                    unit += 1;
                }
            }
        }
    }
    unit_of
}

/// The static shape of units and groups, and each group's usable members.
#[derive(Clone, Debug)]
pub(super) struct Layout {
    /// Blocks per group: the planes of a die, or 1.
    pub planes_per_group: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    /// The physical plane-or-die of each unit.
    pub phys_of_unit: Vec<u32>,
    /// The unit of each physical plane-or-die.
    pub unit_of_phys: Vec<u32>,
    /// Good blocks of each group, first `width` of `planes_per_group` slots.
    members: Vec<u32>,
    width: Vec<u32>,
    /// Division by pages per block, blocks per plane and planes per group
    /// without a `div` instruction: every page the data plane programs,
    /// moves or invalidates is mapped to its block, group and plane.
    ppb_div: FastDiv,
    bpp_div: FastDiv,
    planes_div: FastDiv,
}

impl Layout {
    pub fn new(g: &Geometry, per_die: bool) -> Layout {
        let unit_of_phys = striping_order(g, per_die);
        let mut phys_of_unit = vec![0; unit_of_phys.len()];
        for (phys, &unit) in unit_of_phys.iter().enumerate() {
            phys_of_unit[unit as usize] = phys as u32;
        }
        let planes_per_group = if per_die { g.planes_per_die() } else { 1 };
        let groups = (g.blocks() / planes_per_group) as usize;
        Layout {
            planes_per_group,
            blocks_per_plane: g.blocks_per_plane(),
            pages_per_block: g.pages_per_block(),
            phys_of_unit,
            unit_of_phys,
            members: vec![0; groups * planes_per_group as usize],
            width: vec![0; groups],
            ppb_div: FastDiv::new(g.pages_per_block()),
            bpp_div: FastDiv::new(g.blocks_per_plane()),
            planes_div: FastDiv::new(planes_per_group),
        }
    }

    /// The block of page `ppn`.
    #[inline(always)]
    pub fn block_of_ppn(&self, ppn: u32) -> u32 {
        self.ppb_div.quotient(ppn)
    }

    /// The page offset of page `ppn` in its block (its row in its group).
    #[inline(always)]
    pub fn page_in_block(&self, ppn: u32) -> u32 {
        self.ppb_div.remainder(ppn)
    }

    /// The block offset of `block` in its plane (its group's, on every plane).
    #[inline(always)]
    pub fn block_in_plane(&self, block: u32) -> u32 {
        self.bpp_div.remainder(block)
    }

    /// The plane of `block` within its unit (0 when a unit is a plane).
    #[inline(always)]
    pub fn plane_in_unit(&self, block: u32) -> u32 {
        self.planes_div.remainder(self.bpp_div.quotient(block))
    }

    pub fn groups(&self) -> u32 {
        self.width.len() as u32
    }

    pub fn units(&self) -> u32 {
        self.phys_of_unit.len() as u32
    }

    /// The unit group `group` belongs to.
    pub fn unit_of_group(&self, group: u32) -> u32 {
        self.unit_of_phys[(group / self.blocks_per_plane) as usize]
    }

    /// The groups of `unit`, a contiguous range.
    pub fn groups_of_unit(&self, unit: u32) -> std::ops::Range<u32> {
        let phys = self.phys_of_unit[unit as usize];
        phys * self.blocks_per_plane..(phys + 1) * self.blocks_per_plane
    }

    /// The block on plane `k` of the group's unit (whether usable or not).
    pub fn block_on_plane(&self, group: u32, k: u32) -> u32 {
        let (phys, offset) = (group / self.blocks_per_plane, group % self.blocks_per_plane);
        (phys * self.planes_per_group + k) * self.blocks_per_plane + offset
    }

    #[inline]
    pub fn group_of_block(&self, block: u32) -> u32 {
        if self.planes_per_group == 1 {
            return block;
        }
        let plane = self.bpp_div.quotient(block);
        self.planes_div.quotient(plane) * self.blocks_per_plane + (block - plane * self.blocks_per_plane)
    }

    /// Recompute the members of every group from the bad-block marks.
    pub fn set_members(&mut self, bad: &[bool]) {
        for group in 0..self.groups() {
            let base = (group * self.planes_per_group) as usize;
            let mut n = 0;
            for k in 0..self.planes_per_group {
                let b = self.block_on_plane(group, k);
                if !bad[b as usize] {
                    self.members[base + n] = b;
                    n += 1;
                }
            }
            self.width[group as usize] = n as u32;
        }
    }

    /// Usable blocks of `group` (0: the group is never used).
    #[inline]
    pub fn width(&self, group: u32) -> u32 {
        self.width[group as usize]
    }

    /// The `i`-th usable block of `group`.
    #[inline]
    pub fn member(&self, group: u32, i: u32) -> u32 {
        self.members[(group * self.planes_per_group + i) as usize]
    }

    /// Which member of `group` block `block` is (its index among the usable
    /// ones): its plane in the unit when the group has a block on every
    /// plane, else found among the members.
    #[inline]
    pub fn member_index(&self, group: u32, block: u32) -> u32 {
        if self.width(group) == self.planes_per_group {
            return self.plane_in_unit(block);
        }
        self.members(group).iter().position(|&b| b == block).expect("a member of the group") as u32
    }

    /// The usable blocks of `group`.
    pub fn members(&self, group: u32) -> &[u32] {
        let base = (group * self.planes_per_group) as usize;
        &self.members[base..base + self.width[group as usize] as usize]
    }

    /// Pages `group` holds.
    pub fn capacity(&self, group: u32) -> u32 {
        self.width(group) * self.pages_per_block
    }

    /// The page at `slot` of `group`: slots run row by row (page offset),
    /// member by member within a row, the order multi-plane programs fill.
    pub fn slot_ppn(&self, group: u32, slot: u32) -> u32 {
        let w = self.width(group);
        self.member(group, slot % w) * self.pages_per_block + slot / w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry(planes: u32) -> Geometry {
        crate::nand::GeometryConfig {
            channels: 2,
            chips_per_channel: 2,
            dies_per_chip: 1,
            planes_per_die: planes,
            blocks_per_plane: 4,
            pages_per_block: 4,
            page_size_bytes: 4096,
            oob_size_bytes: 64,
            sector_size_bytes: 512,
            cell_type: Default::default(),
            page_pairing: Default::default(),
            partial_programs_per_page: 1,
        }
        .validate()
        .unwrap()
    }

    /// The divisions by multiplication agree with plain division, on
    /// shapes that are not powers of two too.
    #[test]
    fn address_math_matches_division() {
        for (planes, blocks, pages) in [(2, 4, 4), (3, 5, 6), (1, 7, 3)] {
            let g = crate::nand::GeometryConfig {
                planes_per_die: planes,
                blocks_per_plane: blocks,
                pages_per_block: pages,
                ..geometry(1).config().clone()
            }
            .validate()
            .unwrap();
            let mut l = Layout::new(&g, planes > 1);
            l.set_members(&vec![false; g.blocks() as usize]);
            for ppn in 0..g.pages() as u32 {
                let block = ppn / pages;
                assert_eq!(l.block_of_ppn(ppn), block);
                assert_eq!(l.page_in_block(ppn), ppn % pages);
                assert_eq!(l.block_in_plane(block), block % blocks);
                assert_eq!(l.plane_in_unit(block), block / blocks % planes);
                let group = if planes == 1 { block } else { block / blocks / planes * blocks + block % blocks };
                assert_eq!(l.group_of_block(block), group);
                assert_eq!(l.member_index(group, block), block / blocks % planes);
            }
        }
    }

    #[test]
    fn units_stripe_channel_first() {
        let g = geometry(2);
        let order = unit_order(&g);
        // unit 0 → channel 0, unit 1 → channel 1
        let plane_of_unit = |u: u32| order.iter().position(|&x| x == u).unwrap() as u32;
        let channel_of_unit = |u| g.channel_of_die(plane_of_unit(u) / g.planes_per_die());
        assert_eq!((0..4).map(channel_of_unit).collect::<Vec<_>>(), vec![0, 1, 0, 1]);
        let dies = striping_order(&g, true);
        assert_eq!(dies.len(), 4);
        let die_of_unit = |u: u32| dies.iter().position(|&x| x == u).unwrap() as u32;
        assert_eq!((0..4).map(|u| g.channel_of_die(die_of_unit(u))).collect::<Vec<_>>(), vec![0, 1, 0, 1]);
    }

    #[test]
    fn die_groups_hold_one_block_per_plane_at_one_offset_without_bad_blocks() {
        let g = geometry(2);
        let mut l = Layout::new(&g, true);
        let mut bad = vec![false; g.blocks() as usize];
        bad[l.block_on_plane(5, 1) as usize] = true;
        l.set_members(&bad);
        assert_eq!(l.groups(), g.blocks() / 2);
        for group in 0..l.groups() {
            for &b in l.members(group) {
                assert_eq!(l.group_of_block(b), group);
                assert_eq!(g.block_in_plane(crate::nand::BlockAddr(b.into())), group % 4);
                assert_eq!(g.die_of_block(crate::nand::BlockAddr(b.into())), group / 4);
            }
        }
        assert_eq!((l.width(4), l.width(5)), (2, 1), "group 5 lost its plane-1 block");
        assert_eq!((l.member_index(4, l.block_on_plane(4, 1)), l.member_index(5, l.block_on_plane(5, 0))), (1, 0));
        // Slots fill a row across the members first.
        let (a, b) = (l.member(4, 0), l.member(4, 1));
        let ppb = g.pages_per_block();
        assert_eq!(
            (0..4).map(|s| l.slot_ppn(4, s)).collect::<Vec<_>>(),
            vec![a * ppb, b * ppb, a * ppb + 1, b * ppb + 1]
        );
        assert_eq!(l.capacity(5), ppb);
    }
}
