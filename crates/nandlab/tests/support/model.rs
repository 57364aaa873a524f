//! Desnoyers' analytic write-amplification models ("Analytic models of SSD
//! write performance", SYSTOR 2012), for uniform random single-page writes
//! in steady state, and the hot/cold split built on them.

/// Principal branch of the Lambert W function on [−1/e, 0), by Halley's method.
pub fn lambert_w0(x: f64) -> f64 {
    let mut w = if x < -0.32 { -1.0 + (2.0 * (1.0 + std::f64::consts::E * x)).sqrt() } else { x };
    for _ in 0..100 {
        let e = w.exp();
        let f = w * e - x;
        let step = f / (e * (w + 1.0) - (w + 2.0) * f / (2.0 * w + 2.0));
        w -= step;
        if step.abs() < 1e-15 {
            break;
        }
    }
    w
}

/// FIFO (Eq. 4): WAF = α / (α + W0(−α·e^(−α))), α = physical / logical pages.
pub fn waf_fifo(alpha: f64) -> f64 {
    alpha / (alpha + lambert_w0(-alpha * (-alpha).exp()))
}

/// Greedy (Eq. 12): WAF ≈ WAF_FIFO(k·α) / k, k = 1 + 1/(2b), b pages per block.
pub fn waf_greedy(alpha: f64, pages_per_block: f64) -> f64 {
    let k = 1.0 + 1.0 / (2.0 * pages_per_block);
    waf_fifo(k * alpha) / k
}

/// Hot/cold traffic (a share `r` of the writes goes to a share `f` of the
/// data) kept in two separate pools, each behaving as uniform traffic over
/// its own spare space (Desnoyers §5): the write amplification
/// r·W(α_hot) + (1−r)·W(α_cold) with the spare split between the pools at
/// its optimum, under greedy cleaning.
pub fn waf_hot_cold_optimal_split(alpha: f64, r: f64, f: f64, pages_per_block: f64) -> f64 {
    (1..10_000)
        .filter_map(|i| {
            let hot_physical = f + (alpha - 1.0) * f64::from(i) / 10_000.0; // per logical page
            let (a_hot, a_cold) = (hot_physical / f, (alpha - hot_physical) / (1.0 - f));
            (a_hot > 1.0 && a_cold > 1.0)
                .then(|| r * waf_greedy(a_hot, pages_per_block) + (1.0 - r) * waf_greedy(a_cold, pages_per_block))
        })
        .fold(f64::INFINITY, f64::min)
}
