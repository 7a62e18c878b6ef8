//! `plan --curve`: how each device's memory grows with context, against its
//! budget, with the points where offload begins and where the model stops
//! fitting. Computed by re-planning at each context, drawn as text.

use std::fmt::Write as _;

use headroom_planner::hw::{HardwareSnapshot, format_size};
use headroom_planner::plan::{Plan, Settings, Verdict};
use headroom_planner::profile::ModelProfile;
use headroom_planner::solve::{self, Build};

/// One context size on the curve.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Context size asked for.
    pub n_ctx: u32,
    /// Verdict there.
    pub verdict: Verdict,
    /// GPU layers the solver chose there.
    pub n_gpu_layers: u32,
    /// Per device: bytes counted against its budget (RAM: resident anonymous
    /// plus margin; GPUs: their allocated total).
    pub used: Vec<u64>,
}

/// The curve: points and budgets per device.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// Device names (RAM first).
    pub devices: Vec<String>,
    /// Budget per device.
    pub budgets: Vec<u64>,
    /// Points, by increasing context.
    pub points: Vec<Point>,
}

impl Curve {
    /// Re-plan at contexts from 512 to the training context (doubling).
    #[must_use]
    pub fn compute(
        p: &ModelProfile,
        s: &Settings,
        hw: &HardwareSnapshot,
        build: Build,
        plan: &Plan,
    ) -> Self {
        let train = u32::try_from(p.n_ctx_train).unwrap_or(u32::MAX).max(512);
        let mut ctxs = Vec::new();
        let mut c = 512u32;
        while c < train {
            ctxs.push(c);
            c = c.saturating_mul(2);
        }
        ctxs.push(train);
        let points = ctxs
            .into_iter()
            .map(|n_ctx| {
                let mut at = s.clone();
                at.n_ctx = Some(n_ctx);
                let q = solve::plan(p, &plan.model.path, &at, hw, build);
                let mut used = vec![q.ram.anonymous_bytes + q.devices[0].margin_bytes];
                used.extend(q.devices.iter().skip(1).map(|d| d.total_bytes));
                Point {
                    n_ctx,
                    verdict: q.verdict,
                    n_gpu_layers: q.n_gpu_layers,
                    used,
                }
            })
            .collect();
        let mut devices = vec!["RAM".to_string()];
        devices.extend(plan.devices.iter().skip(1).map(|d| d.name.clone()));
        let mut budgets = vec![plan.ram.budget_bytes];
        budgets.extend(plan.devices.iter().skip(1).map(|d| d.budget_bytes));
        Self {
            devices,
            budgets,
            points,
        }
    }

    /// The first context where the solver moved layers off the GPU.
    #[must_use]
    pub fn offload_begins(&self) -> Option<u32> {
        let first = self.points.first()?;
        self.points
            .iter()
            .find(|q| {
                q.verdict == Verdict::FitsWithOffload
                    && (q.n_gpu_layers < first.n_gpu_layers
                        || first.verdict == Verdict::FitsWithOffload)
            })
            .map(|q| q.n_ctx)
    }

    /// The first context that does not fit.
    #[must_use]
    pub fn stops_fitting(&self) -> Option<u32> {
        self.points
            .iter()
            .find(|q| q.verdict == Verdict::DoesNotFit)
            .map(|q| q.n_ctx)
    }

    /// Draw as text: one column per context point (log scale), one glyph per
    /// device (`R` RAM, `0`… GPUs), `-` for budget lines, `!` above contexts
    /// that do not fit.
    #[must_use]
    pub fn draw(&self, width: usize, height: usize) -> String {
        let n = self.points.len().max(1);
        let col = (width / n).max(3);
        let max = self
            .points
            .iter()
            .flat_map(|q| q.used.iter().copied())
            .chain(self.budgets.iter().copied())
            .max()
            .unwrap_or(1)
            .max(1);
        let top = max + max / 20;
        let row_of =
            |b: u64| -> usize { ((b as f64 / top as f64) * (height - 1) as f64).round() as usize };
        let mut grid = vec![vec![' '; n * col]; height];
        for &b in &self.budgets {
            let r = row_of(b);
            for cell in &mut grid[r] {
                *cell = '-';
            }
        }
        for (i, q) in self.points.iter().enumerate() {
            for (d, &u) in q.used.iter().enumerate() {
                let glyph = if d == 0 {
                    'R'
                } else {
                    char::from_digit((d - 1) as u32 % 10, 10).unwrap_or('G')
                };
                let r = row_of(u).min(height - 1);
                grid[r][i * col + col / 2] = glyph;
            }
            if q.verdict == Verdict::DoesNotFit {
                grid[height - 1][i * col + col / 2] = '!';
            }
        }
        let mut s = String::new();
        let _ = writeln!(
            s,
            "memory against context ({} at the top)",
            format_size(top)
        );
        for (r, line) in grid.iter().enumerate().rev() {
            let label = if r == height - 1 {
                format_size(top)
            } else if r == 0 {
                "0".to_string()
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "{label:>10} │{}",
                line.iter().collect::<String>().trim_end()
            );
        }
        let _ = writeln!(s, "{:>10} └{}", "", "─".repeat(n * col));
        let mut axis = String::new();
        for q in &self.points {
            let lbl = if q.n_ctx >= 1024 {
                format!("{}k", q.n_ctx / 1024)
            } else {
                q.n_ctx.to_string()
            };
            let _ = write!(axis, "{lbl:^col$}");
        }
        let _ = writeln!(s, "{:>10}  {axis}  context", "");
        let legend: Vec<String> = self
            .devices
            .iter()
            .enumerate()
            .map(|(d, name)| {
                let g = if d == 0 {
                    "R".to_string()
                } else {
                    ((d - 1) % 10).to_string()
                };
                format!("{g} {name} (budget {})", format_size(self.budgets[d]))
            })
            .collect();
        let _ = writeln!(
            s,
            "legend    {}; - budget; ! does not fit",
            legend.join(", ")
        );
        match self.offload_begins() {
            Some(c) => {
                let _ = writeln!(s, "offload   begins at context {c}");
            }
            None if self.devices.len() > 1 => {
                let _ = writeln!(s, "offload   none up to the training context");
            }
            None => {}
        }
        match self.stops_fitting() {
            Some(c) => {
                let _ = writeln!(s, "limit     does not fit from context {c}");
            }
            None => {
                let _ = writeln!(s, "limit     fits up to the training context");
            }
        }
        s
    }
}
