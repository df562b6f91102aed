//! Plots of a run, as SVG and PNG (plotters backends): a tcptrace-style time-sequence
//! graph per TCP flow, cwnd/ssthresh, RTT and throughput over time.
//!
//! The charts are drawn with plotters' backend primitives. Text in SVG is SVG text;
//! in PNG it is drawn from a built-in 8x8 bitmap font, so no system font is needed.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters_backend::DrawingErrorKind;

use crate::trace::{FlowTrace, QueueTrace};

/// Width of every plot, pixels.
pub const WIDTH: u32 = 1000;
/// Height of every plot, pixels.
pub const HEIGHT: u32 = 600;

/// Most points drawn per series; longer series are thinned evenly.
const MAX_POINTS: usize = 6000;

const MARGIN_LEFT: i32 = 90;
const MARGIN_RIGHT: i32 = 170;
const MARGIN_TOP: i32 = 40;
const MARGIN_BOTTOM: i32 = 55;

/// How a series is drawn.
#[derive(Debug, Clone)]
pub enum Shape {
    /// Points joined by straight lines.
    Line(Vec<(f64, f64)>),
    /// Points joined as a staircase (each value holds until the next).
    Steps(Vec<(f64, f64)>),
    /// Small crosses.
    Marks(Vec<(f64, f64)>),
    /// Vertical bars at x from y0 to y1 (segments in a time-sequence graph).
    Bars(Vec<(f64, f64, f64)>),
}

/// One series of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Colour.
    pub color: RGBColor,
    /// The data.
    pub shape: Shape,
}

/// A chart: a title, axis labels and series.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// The series, drawn in order.
    pub series: Vec<Series>,
}

fn thin<T: Copy>(v: &[T]) -> Vec<T> {
    if v.len() <= MAX_POINTS {
        return v.to_vec();
    }
    let step = v.len().div_ceil(MAX_POINTS);
    v.iter()
        .step_by(step)
        .copied()
        .chain(v.last().copied())
        .collect()
}

impl Chart {
    fn bounds(&self) -> (f64, f64, f64, f64) {
        let mut xs = (f64::INFINITY, f64::NEG_INFINITY);
        let mut ys = (f64::INFINITY, f64::NEG_INFINITY);
        let mut add = |x: f64, y: f64| {
            xs = (xs.0.min(x), xs.1.max(x));
            ys = (ys.0.min(y), ys.1.max(y));
        };
        for s in &self.series {
            match &s.shape {
                Shape::Line(p) | Shape::Steps(p) | Shape::Marks(p) => {
                    p.iter().for_each(|&(x, y)| add(x, y))
                }
                Shape::Bars(b) => b.iter().for_each(|&(x, y0, y1)| {
                    add(x, y0);
                    add(x, y1);
                }),
            }
        }
        if !xs.0.is_finite() {
            return (0.0, 1.0, 0.0, 1.0);
        }
        let ymin = ys.0.min(0.0);
        let pad = |lo: f64, hi: f64| if hi > lo { hi } else { lo + 1.0 };
        (
            xs.0.min(0.0),
            pad(xs.0.min(0.0), xs.1),
            ymin,
            pad(ymin, ys.1 * 1.05),
        )
    }

    /// Write the chart to `stem.svg` and `stem.png`; returns both paths.
    pub fn save(&self, stem: &Path) -> Result<Vec<PathBuf>, String> {
        let svg = stem.with_extension("svg");
        let png = stem.with_extension("png");
        {
            let mut backend = SVGBackend::new(&svg, (WIDTH, HEIGHT));
            self.draw(&mut backend, false)
                .map_err(|e| format!("cannot draw {}: {e}", svg.display()))?;
            backend
                .present()
                .map_err(|e| format!("cannot write {}: {e}", svg.display()))?;
        }
        {
            let mut backend = BitMapBackend::new(&png, (WIDTH, HEIGHT));
            self.draw(&mut backend, true)
                .map_err(|e| format!("cannot draw {}: {e}", png.display()))?;
            backend
                .present()
                .map_err(|e| format!("cannot write {}: {e}", png.display()))?;
        }
        Ok(vec![svg, png])
    }

    /// Draw on any plotters backend; `bitmap` selects the built-in pixel font.
    pub fn draw<B: DrawingBackend>(
        &self,
        b: &mut B,
        bitmap: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        let area = PlotArea::new(self.bounds());
        b.draw_rect((0, 0), (WIDTH as i32, HEIGHT as i32), &WHITE, true)?;
        area.draw_grid(b, bitmap)?;
        for (i, s) in self.series.iter().enumerate() {
            area.draw_series(b, bitmap, i, s)?;
        }
        self.draw_labels(b, bitmap, &area)
    }

    /// The frame, the title and the axis labels.
    fn draw_labels<B: DrawingBackend>(
        &self,
        b: &mut B,
        bitmap: bool,
        area: &PlotArea,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        let (left, top) = (MARGIN_LEFT, MARGIN_TOP);
        let (right, bottom) = (MARGIN_LEFT + area.plot_w, MARGIN_TOP + area.plot_h);
        b.draw_rect((left, top), (right, bottom), &BLACK, false)?;
        text(
            b,
            bitmap,
            &self.title,
            (WIDTH as i32 / 2, 5),
            HPos::Center,
            VPos::Top,
            2,
        )?;
        let x_label_at = (left + area.plot_w / 2, HEIGHT as i32 - 20);
        text(
            b,
            bitmap,
            &self.x_label,
            x_label_at,
            HPos::Center,
            VPos::Top,
            1,
        )?;
        text(
            b,
            bitmap,
            &self.y_label,
            (8, top - 12),
            HPos::Left,
            VPos::Top,
            1,
        )?;
        Ok(())
    }
}

/// The plotting rectangle and the data bounds it shows.
struct PlotArea {
    /// (x0, x1, y0, y1): the data at the rectangle's edges.
    bounds: (f64, f64, f64, f64),
    plot_w: i32,
    plot_h: i32,
}

impl PlotArea {
    fn new(bounds: (f64, f64, f64, f64)) -> PlotArea {
        PlotArea {
            bounds,
            plot_w: WIDTH as i32 - MARGIN_LEFT - MARGIN_RIGHT,
            plot_h: HEIGHT as i32 - MARGIN_TOP - MARGIN_BOTTOM,
        }
    }

    /// The pixel of data point (x, y).
    fn map(&self, x: f64, y: f64) -> (i32, i32) {
        let (x0, x1, y0, y1) = self.bounds;
        let px = MARGIN_LEFT as f64 + (x - x0) / (x1 - x0) * self.plot_w as f64;
        let py = (MARGIN_TOP + self.plot_h) as f64 - (y - y0) / (y1 - y0) * self.plot_h as f64;
        (px.round() as i32, py.round() as i32)
    }

    /// Grid lines, ticks and tick labels on both axes.
    fn draw_grid<B: DrawingBackend>(
        &self,
        b: &mut B,
        bitmap: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        let (x0, x1, y0, y1) = self.bounds;
        let grid = RGBColor(225, 225, 225);
        let (left, top) = (MARGIN_LEFT, MARGIN_TOP);
        let (right, bottom) = (MARGIN_LEFT + self.plot_w, MARGIN_TOP + self.plot_h);
        for t in ticks(x0, x1) {
            let (px, _) = self.map(t, y0);
            b.draw_line((px, top), (px, bottom), &grid)?;
            b.draw_line((px, bottom), (px, bottom + 5), &BLACK)?;
            text(
                b,
                bitmap,
                &tick_label(t),
                (px, bottom + 8),
                HPos::Center,
                VPos::Top,
                1,
            )?;
        }
        for t in ticks(y0, y1) {
            let (_, py) = self.map(x0, t);
            b.draw_line((left, py), (right, py), &grid)?;
            b.draw_line((left - 5, py), (left, py), &BLACK)?;
            text(
                b,
                bitmap,
                &tick_label(t),
                (left - 8, py),
                HPos::Right,
                VPos::Center,
                1,
            )?;
        }
        Ok(())
    }

    /// Series number `i`, and its legend entry unless it has no name.
    fn draw_series<B: DrawingBackend>(
        &self,
        b: &mut B,
        bitmap: bool,
        i: usize,
        s: &Series,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        let map = |x: f64, y: f64| self.map(x, y);
        let style = ShapeStyle::from(&s.color).stroke_width(1);
        match &s.shape {
            Shape::Line(p) => {
                let pts: Vec<_> = thin(p).iter().map(|&(x, y)| map(x, y)).collect();
                b.draw_path(pts, &style)?;
            }
            Shape::Steps(p) => {
                let mut pts = Vec::new();
                for &(x, y) in &thin(p) {
                    if let Some(&(_, last_y)) = pts.last() {
                        pts.push((map(x, y).0, last_y));
                    }
                    pts.push(map(x, y));
                }
                b.draw_path(pts, &style)?;
            }
            Shape::Marks(p) => {
                for &(x, y) in &thin(p) {
                    let (px, py) = map(x, y);
                    b.draw_line((px - 3, py - 3), (px + 3, py + 3), &style)?;
                    b.draw_line((px - 3, py + 3), (px + 3, py - 3), &style)?;
                }
            }
            Shape::Bars(bars) => {
                for &(x, lo, hi) in &thin(bars) {
                    let (px, py0) = map(x, lo);
                    let (_, py1) = map(x, hi);
                    b.draw_line((px, py0), (px, py1.min(py0 - 1)), &style)?;
                    b.draw_line((px - 2, py1), (px + 2, py1), &style)?;
                }
            }
        }
        if s.name.is_empty() {
            return Ok(());
        }
        let right = MARGIN_LEFT + self.plot_w;
        let ly = MARGIN_TOP + 10 + 18 * i as i32;
        b.draw_line((right + 12, ly), (right + 32, ly), &style.stroke_width(2))?;
        text(
            b,
            bitmap,
            &s.name,
            (right + 38, ly),
            HPos::Left,
            VPos::Center,
            1,
        )
    }
}

/// Draw `s` anchored at `pos`; `scale` 1 is small text, 2 a title.
fn text<B: DrawingBackend>(
    b: &mut B,
    bitmap: bool,
    s: &str,
    pos: (i32, i32),
    h: HPos,
    v: VPos,
    scale: i32,
) -> Result<(), DrawingErrorKind<B::ErrorType>> {
    if !bitmap {
        let style = TextStyle::from(("sans-serif", 12 + 5 * (scale - 1)).into_font())
            .color(&BLACK)
            .pos(Pos::new(h, v));
        return b.draw_text(s, &style, pos);
    }
    let (w, hgt) = (8 * scale * s.chars().count() as i32, 8 * scale);
    let x = match h {
        HPos::Left => pos.0,
        HPos::Center => pos.0 - w / 2,
        HPos::Right => pos.0 - w,
    };
    let y = match v {
        VPos::Top => pos.1,
        VPos::Center => pos.1 - hgt / 2,
        VPos::Bottom => pos.1 - hgt,
    };
    for (i, c) in s.chars().enumerate() {
        let glyph = font8x8::legacy::BASIC_LEGACY
            .get(c as usize)
            .copied()
            .unwrap_or([0; 8]);
        for (row, bits) in glyph.iter().enumerate() {
            for col in 0..8 {
                if bits & (1 << col) != 0 {
                    let px = x + (i as i32 * 8 + col) * scale;
                    let py = y + row as i32 * scale;
                    for dy in 0..scale {
                        for dx in 0..scale {
                            b.draw_pixel((px + dx, py + dy), BLACK.to_backend_color())?;
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = hi - lo;
    let raw = span / 8.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s <= 8.0)
        .unwrap_or(10.0 * mag);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 && out.len() < 20 {
        out.push(t);
        t += step;
    }
    out
}

fn tick_label(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e9 {
        format!("{}G", trim(v / 1e9))
    } else if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The four charts of one TCP flow.
pub fn flow_charts(name: &str, trace: &FlowTrace) -> Vec<(String, Chart)> {
    let (unit, scale) = throughput_unit(trace);
    let throughput = vec![Series {
        name: "goodput".into(),
        color: RGBColor(0, 120, 0),
        shape: Shape::Steps(throughput(trace, scale)),
    }];
    let chart = |title: &str, y: &str, series| Chart {
        title: format!("{name}: {title}"),
        x_label: "time (s)".into(),
        y_label: y.into(),
        series,
    };
    vec![
        (
            "tsg".into(),
            chart(
                "time-sequence graph",
                "sequence offset (bytes)",
                time_sequence_series(trace),
            ),
        ),
        (
            "cwnd".into(),
            chart("congestion window", "bytes", cwnd_series(trace)),
        ),
        (
            "rtt".into(),
            chart("round-trip time", "ms", rtt_series(trace)),
        ),
        (
            "throughput".into(),
            chart("goodput at the receiver", unit, throughput),
        ),
    ]
}

/// The time-sequence graph: receive window, ACKs, data, SACK blocks, retransmissions.
fn time_sequence_series(trace: &FlowTrace) -> Vec<Series> {
    let first: Vec<_> = trace
        .segments
        .iter()
        .filter(|s| !s.retransmit)
        .map(|s| (s.time, s.start as f64, s.end as f64))
        .collect();
    let retx: Vec<_> = trace
        .segments
        .iter()
        .filter(|s| s.retransmit)
        .map(|s| (s.time, s.start as f64, s.end as f64))
        .collect();
    let mut tsg = vec![
        Series {
            name: "receive window".into(),
            color: RGBColor(200, 170, 0),
            shape: Shape::Steps(trace.window.iter().map(|&(t, w)| (t, w as f64)).collect()),
        },
        Series {
            name: "ACK".into(),
            color: RGBColor(0, 150, 0),
            shape: Shape::Steps(trace.acks.iter().map(|&(t, a)| (t, a as f64)).collect()),
        },
        Series {
            name: "data sent".into(),
            color: BLACK,
            shape: Shape::Bars(first),
        },
    ];
    if !trace.sacks.is_empty() {
        tsg.push(Series {
            name: "SACK block".into(),
            color: RGBColor(150, 0, 200),
            shape: Shape::Bars(
                trace
                    .sacks
                    .iter()
                    .map(|&(t, l, r)| (t, l as f64, r as f64))
                    .collect(),
            ),
        });
    }
    tsg.push(Series {
        name: format!("retransmit ({})", trace.retransmits),
        color: RGBColor(220, 0, 0),
        shape: Shape::Bars(retx.clone()),
    });
    tsg.push(Series {
        name: String::new(),
        color: RGBColor(220, 0, 0),
        shape: Shape::Marks(retx.iter().map(|&(t, _, hi)| (t, hi)).collect()),
    });
    tsg
}

/// cwnd and, where set, ssthresh.
fn cwnd_series(trace: &FlowTrace) -> Vec<Series> {
    let mut cwnd = vec![Series {
        name: "cwnd".into(),
        color: RGBColor(0, 0, 200),
        shape: Shape::Steps(
            trace
                .info
                .iter()
                .map(|&(t, c, _, _)| (t, f64::from(c)))
                .collect(),
        ),
    }];
    let ssthresh: Vec<_> = trace
        .info
        .iter()
        .filter_map(|&(t, _, s, _)| s.map(|s| (t, f64::from(s))))
        .collect();
    if !ssthresh.is_empty() {
        cwnd.push(Series {
            name: "ssthresh".into(),
            color: RGBColor(220, 100, 0),
            shape: Shape::Steps(ssthresh),
        });
    }
    cwnd
}

/// RTT samples and the smoothed RTT.
fn rtt_series(trace: &FlowTrace) -> Vec<Series> {
    vec![
        Series {
            name: "RTT sample".into(),
            color: RGBColor(0, 120, 200),
            shape: Shape::Marks(trace.rtt.clone()),
        },
        Series {
            name: "srtt".into(),
            color: RGBColor(200, 0, 0),
            shape: Shape::Line(
                trace
                    .info
                    .iter()
                    .filter_map(|&(t, _, _, s)| s.map(|s| (t, s)))
                    .collect(),
            ),
        },
    ]
}

fn throughput_unit(trace: &FlowTrace) -> (&'static str, f64) {
    let peak = throughput(trace, 1.0)
        .iter()
        .map(|p| p.1)
        .fold(0.0, f64::max);
    if peak >= 1e8 {
        ("Mbit/s", 1e6)
    } else if peak >= 1e5 {
        ("kbit/s", 1e3)
    } else {
        ("bit/s", 1.0)
    }
}

/// Goodput in bins of a hundredth of the transfer, in bits per second over `scale`.
fn throughput(trace: &FlowTrace, scale: f64) -> Vec<(f64, f64)> {
    let Some(&(end, _)) = trace.delivered.last() else {
        return Vec::new();
    };
    let bin = (end / 100.0).max(1e-6);
    let mut out = Vec::new();
    let mut last_bytes = 0u64;
    let mut i = 0;
    let mut t = 0.0;
    while t < end {
        let next = t + bin;
        let mut bytes = last_bytes;
        while i < trace.delivered.len() && trace.delivered[i].0 <= next {
            bytes = trace.delivered[i].1;
            i += 1;
        }
        out.push((t, (bytes - last_bytes) as f64 * 8.0 / bin / scale));
        last_bytes = bytes;
        t = next;
    }
    out
}

/// Write every chart of every traced flow into `dir` as `FLOW-KIND.svg/.png`.
pub fn write_flow_plots(dir: &Path, flows: &[(&str, &FlowTrace)]) -> Result<Vec<PathBuf>, String> {
    let mut written = Vec::new();
    for (name, trace) in flows {
        if trace.segments.is_empty() && trace.info.is_empty() {
            continue;
        }
        for (kind, chart) in flow_charts(name, trace) {
            written.extend(chart.save(&dir.join(format!("{name}-{kind}")))?);
        }
    }
    Ok(written)
}

/// Colours of [`spread_chart`]'s series, in turn.
const PALETTE: [RGBColor; 6] = [
    RGBColor(0, 0, 200),
    RGBColor(220, 0, 0),
    RGBColor(0, 150, 0),
    RGBColor(220, 100, 0),
    RGBColor(150, 0, 200),
    RGBColor(0, 150, 150),
];

/// One figure of a sweep across its seeds: per named series (a flow), a mark at each
/// `(seed, value)`.
pub fn spread_chart(title: &str, y_label: &str, series: Vec<(String, Vec<(f64, f64)>)>) -> Chart {
    Chart {
        title: title.into(),
        x_label: "seed".into(),
        y_label: y_label.into(),
        series: series
            .into_iter()
            .zip(PALETTE.iter().cycle())
            .map(|((name, points), &color)| Series {
                name,
                color,
                shape: Shape::Marks(points),
            })
            .collect(),
    }
}

/// The queue-delay chart of one router egress queue: the queueing delay a frame
/// arriving at each sample would have seen, and the backlog in KiB.
pub fn queue_chart(queue: &QueueTrace) -> Chart {
    let delay = queue.samples.iter().map(|s| (s.0, s.2)).collect();
    Chart {
        title: format!("{}: egress queue delay", queue.name),
        x_label: "time (s)".into(),
        y_label: "queueing delay (ms)".into(),
        series: vec![Series {
            name: "queue delay".into(),
            color: RGBColor(160, 0, 160),
            shape: Shape::Steps(delay),
        }],
    }
}

/// Write the queue-delay chart of every router egress queue that ever held a frame
/// into `dir` as `ROUTER-LINK-queue.svg/.png`.
pub fn write_queue_plots(dir: &Path, queues: &[QueueTrace]) -> Result<Vec<PathBuf>, String> {
    let mut written = Vec::new();
    for queue in queues {
        if queue.samples.iter().all(|s| s.1 == 0) {
            continue;
        }
        let chart = queue_chart(queue);
        written.extend(chart.save(&dir.join(format!("{}-queue", queue.name)))?);
    }
    Ok(written)
}
