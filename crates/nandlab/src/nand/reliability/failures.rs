//! Failing programs and erases: with a probability that grows with wear,
//! at configured addresses, and every erase of a block worn past its
//! endurance.
//!
//! A program or erase reports a failure in the chip's status register
//! (the ONFI "FAIL" bit) when the cells do not reach their target state
//! within the allowed pulses; it happens more often on worn blocks, whose
//! oxide traps charge (Cai et al. 2017, Section III). The model:
//!
//! ```text
//! P(fail) = p0 · (1 + 9 · (PE / E)^2)     (10 × p0 at the rated endurance E)
//! ```
//!
//! and an erase of a block at or past `E × worn_out_factor` P/E cycles
//! always fails (the block is worn out). A failed program leaves the page
//! unreadable; the block becomes a grown bad block (see the parent module).
//!
//! Exact failures reproduce a case: `program@block=17,page=3` fails the
//! first program of that page, `erase@block=9` the first erase of that
//! block, after the format (format erases never fail: a fresh device's
//! failures are its factory bad blocks).

use std::fmt;

/// How likely programs and erases are to fail.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FailureModel {
    /// `p0` of a program (at 0 P/E cycles).
    pub program_fail_probability: f64,
    /// `p0` of an erase.
    pub erase_fail_probability: f64,
    /// Erases fail always from `endurance × worn_out_factor` P/E cycles.
    pub worn_out_factor: f64,
}

impl FailureModel {
    /// The probability that an operation with base probability `p0` fails
    /// on a block with `pe` P/E cycles, endurance `endurance`.
    pub fn probability(p0: f64, pe: u32, endurance: u32) -> f64 {
        let x = f64::from(pe) / f64::from(endurance.max(1));
        (p0 * (1.0 + 9.0 * x * x)).clamp(0.0, 1.0)
    }

    /// Whether a block with `pe` P/E cycles is worn out (every erase fails).
    pub fn worn_out(&self, pe: u32, endurance: u32) -> bool {
        f64::from(pe) >= f64::from(endurance) * self.worn_out_factor
    }
}

/// Which operation an exact failure fails.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum FailAt {
    Program { block: u64, page: u32 },
    Erase { block: u64 },
}

impl fmt::Display for FailAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailAt::Program { block, page } => write!(f, "program@block={block},page={page}"),
            FailAt::Erase { block } => write!(f, "erase@block={block}"),
        }
    }
}

impl FailAt {
    /// Parse `program@block=B,page=P` or `erase@block=B`. The error says
    /// what is wrong (the caller adds where it came from).
    pub fn parse(text: &str) -> Result<FailAt, String> {
        let text = text.trim();
        let (op, fields) = text
            .split_once('@')
            .ok_or_else(|| format!("`{text}`: expected program@block=B,page=P or erase@block=B"))?;
        let (mut block, mut page) = (None, None);
        for field in fields.split(',') {
            let (key, value) =
                field.split_once('=').ok_or_else(|| format!("`{field}`: expected KEY=NUMBER (block=B, page=P)"))?;
            let slot = match key.trim() {
                "block" => &mut block,
                "page" => &mut page,
                k => return Err(format!("unknown field `{k}` (expected block or page)")),
            };
            if slot.is_some() {
                return Err(format!("`{}` given twice", key.trim()));
            }
            let n: u64 =
                value.trim().parse().map_err(|_| format!("`{}`: `{}` is not a number", key.trim(), value.trim()))?;
            *slot = Some(n);
        }
        let block = block.ok_or("missing block=B")?;
        match op.trim() {
            "program" => {
                let page = page.ok_or("missing page=P (program@block=B,page=P)")?;
                let page = u32::try_from(page).map_err(|_| format!("page {page} is too large"))?;
                Ok(FailAt::Program { block, page })
            }
            "erase" if page.is_some() => Err("an erase fails a whole block: give block=B only".into()),
            "erase" => Ok(FailAt::Erase { block }),
            o => Err(format!("unknown operation `{o}` (expected program or erase)")),
        }
    }

    /// Check the address against a device of `blocks` blocks of `pages_per_block` pages.
    pub fn check(&self, blocks: u32, pages_per_block: u32) -> Result<(), String> {
        let (block, page) = match *self {
            FailAt::Program { block, page } => (block, Some(page)),
            FailAt::Erase { block } => (block, None),
        };
        if block >= u64::from(blocks) {
            return Err(format!("{self}: block {block} is beyond the last block {}", blocks - 1));
        }
        if let Some(p) = page.filter(|&p| p >= pages_per_block) {
            return Err(format!("{self}: page {p} is beyond the last page {} of a block", pages_per_block - 1));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_failures_parse_and_round_trip() {
        assert_eq!(FailAt::parse("program@block=17,page=3"), Ok(FailAt::Program { block: 17, page: 3 }));
        assert_eq!(FailAt::parse(" erase@block=9 "), Ok(FailAt::Erase { block: 9 }));
        assert_eq!(FailAt::parse("program@page=3, block=17"), Ok(FailAt::Program { block: 17, page: 3 }));
        for s in ["program@block=17,page=3", "erase@block=9"] {
            assert_eq!(FailAt::parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn bad_exact_failures_say_why() {
        for (text, why) in [
            ("program", "expected program@block"),
            ("read@block=1", "unknown operation `read`"),
            ("erase@block=x", "`block`: `x` is not a number"),
            ("erase@block=1,page=2", "whole block"),
            ("program@block=1", "missing page"),
            ("erase@page=1", "missing block"),
            ("erase@block=1,block=2", "given twice"),
            ("erase@lun=1", "unknown field `lun`"),
            ("erase@block", "expected KEY=NUMBER"),
            ("program@block=1,page=99999999999", "too large"),
        ] {
            let e = FailAt::parse(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
        assert!(FailAt::Erase { block: 10 }.check(10, 4).unwrap_err().contains("beyond the last block 9"));
        assert!(FailAt::Program { block: 1, page: 4 }.check(10, 4).unwrap_err().contains("beyond the last page 3"));
        assert!(FailAt::Program { block: 1, page: 3 }.check(10, 4).is_ok());
    }

    #[test]
    fn failures_grow_with_wear() {
        let p = |pe| FailureModel::probability(1e-4, pe, 3000);
        assert_eq!(p(0), 1e-4);
        assert!((p(3000) - 1e-3).abs() < 1e-12);
        assert!(p(1500) > p(0) && p(1500) < p(3000));
        let m = FailureModel { program_fail_probability: 0.0, erase_fail_probability: 0.0, worn_out_factor: 1.5 };
        assert!(!m.worn_out(4499, 3000) && m.worn_out(4500, 3000));
    }
}
