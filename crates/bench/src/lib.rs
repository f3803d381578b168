//! The pieces of `appupdate-bench`: a latency proxy, request accounting from the sandbox's
//! request log, the scenarios, and small statistics. The binary (`src/main.rs`) runs the whole
//! benchmark and writes `docs/performance.md`; see there.

pub mod accounting;
pub mod proxy;
pub mod scenario;

/// Median, minimum and maximum of a sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

/// Summarises `xs` (the median of an even count is the mean of the two middle values).
pub fn summarize(xs: &[f64]) -> Summary {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return Summary::default();
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Summary {
        median,
        min: v[0],
        max: v[n - 1],
        n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_samples() {
        assert_eq!(summarize(&[3.0, 1.0, 2.0]).median, 2.0);
        assert_eq!(summarize(&[4.0, 1.0, 2.0, 3.0]).median, 2.5);
        let s = summarize(&[5.0, 1.0, 9.0]);
        assert_eq!((s.min, s.max, s.n), (1.0, 9.0, 3));
        assert_eq!(summarize(&[]).n, 0);
    }
}
