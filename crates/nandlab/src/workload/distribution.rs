//! Access distributions over `n` aligned positions, named as fio names them.
//!
//! - `random`: uniform (fio's name for it), with replacement — fio's
//!   `norandommap`, which is what the analytic write-amplification models
//!   assume;
//! - `zipf:θ`: P(rank k) ∝ k^−θ (rejection-inversion sampler from
//!   `rand_distr`);
//! - `pareto:h`: fio's definition, position = (n−1)·U^(ln h / ln(1−h)),
//!   so `pareto:0.2` sends about 80 % of accesses to 20 % of the positions.
//!
//! Skewed ranks are scattered over the space by a fixed bijection (an
//! invertible multiply-xorshift permutation with cycle walking), as fio
//! hashes them, so hot data is not all at the start of the device while the
//! distribution of access counts stays exact.

use crate::seed::Rng;
use rand::RngExt;
use rand_distr::{Distribution as _, Zipf};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A distribution as configured.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(try_from = "String", into = "String")]
pub enum Distribution {
    #[default]
    Uniform,
    Zipf(f64),
    Pareto(f64),
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distribution::Uniform => write!(f, "random"),
            Distribution::Zipf(t) => write!(f, "zipf:{t}"),
            Distribution::Pareto(h) => write!(f, "pareto:{h}"),
        }
    }
}

impl std::str::FromStr for Distribution {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let value = |what: &str| -> Result<f64, String> {
            arg.ok_or_else(|| format!("`{s}`: {what} needs a parameter, e.g. {what}:1.2"))?
                .parse::<f64>()
                .map_err(|_| format!("`{s}`: the parameter is not a number"))
        };
        match name {
            "random" | "uniform" => Ok(Distribution::Uniform),
            "zipf" => {
                let t = value("zipf")?;
                if !(t > 0.0 && t.is_finite()) {
                    return Err(format!("`{s}`: zipf θ must be positive"));
                }
                Ok(Distribution::Zipf(t))
            }
            "pareto" => {
                let h = value("pareto")?;
                if !(h > 0.0 && h < 1.0) {
                    return Err(format!("`{s}`: pareto h must be within (0, 1)"));
                }
                Ok(Distribution::Pareto(h))
            }
            other => Err(format!("unknown distribution `{other}` (random, zipf:θ, pareto:h)")),
        }
    }
}

impl TryFrom<String> for Distribution {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Distribution> for String {
    fn from(d: Distribution) -> String {
        d.to_string()
    }
}

/// A sampler of positions `0 .. n`.
pub struct PositionSampler {
    n: u64,
    kind: Sampler,
    permutation: Scatter,
}

enum Sampler {
    Uniform,
    Zipf(Zipf<f64>),
    Pareto(f64),
}

impl PositionSampler {
    pub fn new(distribution: Distribution, n: u64) -> Result<Self, String> {
        let n = n.max(1);
        let kind = match distribution {
            Distribution::Uniform => Sampler::Uniform,
            Distribution::Zipf(t) => Sampler::Zipf(Zipf::new(n as f64, t).map_err(|e| format!("zipf: {e}"))?),
            Distribution::Pareto(h) => Sampler::Pareto(h.ln() / (1.0 - h).ln()),
        };
        Ok(PositionSampler { n, kind, permutation: Scatter::new(n) })
    }

    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        match &self.kind {
            Sampler::Uniform => rng.random_range(0..self.n),
            Sampler::Zipf(z) => {
                let rank = (z.sample(rng) as u64).clamp(1, self.n) - 1;
                self.permutation.apply(rank)
            }
            Sampler::Pareto(pow) => {
                let u: f64 = rng.random();
                let rank = (((self.n - 1) as f64) * u.powf(*pow)) as u64;
                self.permutation.apply(rank.min(self.n - 1))
            }
        }
    }
}

/// A fixed bijection of `0 .. n`: a permutation of the enclosing power of
/// two (odd multiply and xorshift are invertible mod 2^k), walked until the
/// value falls inside `0 .. n`.
struct Scatter {
    n: u64,
    mask: u64,
    shift: u32,
}

impl Scatter {
    fn new(n: u64) -> Self {
        let bits = 64 - (n.max(2) - 1).leading_zeros();
        Scatter { n, mask: if bits >= 64 { u64::MAX } else { (1 << bits) - 1 }, shift: (bits / 2).max(1) }
    }

    fn step(&self, mut x: u64) -> u64 {
        x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15 | 1) & self.mask;
        x ^= x >> self.shift;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9 | 1) & self.mask;
        x ^ (x >> self.shift)
    }

    fn apply(&self, rank: u64) -> u64 {
        let mut x = self.step(rank);
        while x >= self.n {
            x = self.step(x);
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn scatter_is_a_permutation() {
        for n in [1u64, 2, 3, 10, 64, 1000, 1025] {
            let s = Scatter::new(n);
            let mut seen: Vec<u64> = (0..n).map(|r| s.apply(r)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
    }

    #[test]
    fn pareto_point_two_is_roughly_eighty_twenty() {
        let s = PositionSampler::new(Distribution::Pareto(0.2), 10_000).unwrap();
        let mut rng = Rng::seed_from_u64(1);
        let mut counts = vec![0u32; 10_000];
        for _ in 0..200_000 {
            counts[s.sample(&mut rng) as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top: u32 = counts[..2000].iter().sum();
        let share = f64::from(top) / 200_000.0;
        assert!((0.75..0.85).contains(&share), "top 20% got {share}");
    }

    #[test]
    fn zipf_makes_rank_one_the_hottest() {
        let s = PositionSampler::new(Distribution::Zipf(1.2), 1000).unwrap();
        let mut rng = Rng::seed_from_u64(2);
        let mut counts = vec![0u32; 1000];
        for _ in 0..50_000 {
            counts[s.sample(&mut rng) as usize] += 1;
        }
        let hottest = counts.iter().enumerate().max_by_key(|(_, c)| **c).unwrap().0 as u64;
        assert_eq!(hottest, s.permutation.apply(0));
    }

    #[test]
    fn bad_distributions_are_rejected() {
        assert!("zipf".parse::<Distribution>().is_err());
        assert!("pareto:1.5".parse::<Distribution>().is_err());
        assert!("normal:3".parse::<Distribution>().is_err());
        assert_eq!("zipf:1.2".parse::<Distribution>().unwrap(), Distribution::Zipf(1.2));
    }
}
