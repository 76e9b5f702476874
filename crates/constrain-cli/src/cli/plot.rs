//! `constrain plot`: draws a `--trace` file as an SVG chart.
//!
//! Input: the JSON lines `constrain --trace FILE` wrote (one object per output token, plus
//! `closing` and `backtrack` event lines; see `constrain_llama::trace`). Output: an SVG
//! with one bar per sampled token, as tall as the probability mass the mask removed there;
//! forced (jump-forward) tokens as shaded columns; closing and backtracks as vertical lines
//! at the step where they happened; the tokens' text under the axis where it fits; and a
//! title with the totals. Needs no model. Input that is not such a trace is an error naming
//! the line, never a panic.
use super::{Failure, EXIT_OTHER};
use anyhow::{anyhow, Context as _};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::FontTransform;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `constrain plot`.
#[derive(clap::Args, Debug)]
pub struct PlotArgs {
    /// The trace: the JSON lines file `constrain --trace FILE` wrote.
    pub trace: PathBuf,
    /// The SVG to write [default: the trace's path with the extension `.svg`].
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// One output token of a trace, as the chart needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// Its position in the output.
    pub step: usize,
    /// Its text.
    pub text: String,
    /// Fed by jump-forward rather than sampled.
    pub forced: bool,
    /// Probability mass the mask removed (`None` for a forced token).
    pub mass_removed: Option<f64>,
}

/// A `closing` or `backtrack` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Closing mode began at this step.
    Closing(usize),
    /// A backtrack at this step (back to the position it names).
    Backtrack(usize),
}

/// A parsed trace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// The token lines, in file order.
    pub tokens: Vec<Token>,
    /// The event lines, in file order.
    pub events: Vec<Event>,
}

/// The largest step a trace may name: far beyond any context, and it keeps a garbage number
/// from sizing the chart.
const MAX_STEP: usize = 1 << 24;

/// Parses a trace; an error names the 1-based line and what is wrong with it. Blank lines
/// are skipped; a trace without a token line is an error.
pub fn parse_trace(text: &str) -> Result<Trace, String> {
    let mut trace = Trace::default();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| format!("line {n}: not JSON: {e}"))?;
        let obj = v.as_object().ok_or_else(|| format!("line {n}: not a JSON object"))?;
        let step = |key: &str| -> Result<usize, String> {
            let s = obj.get(key).and_then(Value::as_u64).ok_or_else(|| format!("line {n}: no \"{key}\" count"))?;
            usize::try_from(s)
                .ok()
                .filter(|&s| s <= MAX_STEP)
                .ok_or_else(|| format!("line {n}: \"{key}\" {s} is too large"))
        };
        match obj.get("event") {
            Some(Value::String(e)) if e == "closing" => trace.events.push(Event::Closing(step("step")?)),
            Some(Value::String(e)) if e == "backtrack" => {
                step("to")?;
                trace.events.push(Event::Backtrack(step("step")?));
            }
            Some(e) => return Err(format!("line {n}: unknown event {e}")),
            None => {
                let text = obj.get("text").and_then(Value::as_str).ok_or_else(|| format!("line {n}: no \"text\""))?;
                let forced = match obj.get("kind").and_then(Value::as_str) {
                    Some("sampled") => false,
                    Some("forced") => true,
                    _ => return Err(format!("line {n}: \"kind\" is neither \"sampled\" nor \"forced\"")),
                };
                let mass_removed = match obj.get("mass_removed") {
                    None | Some(Value::Null) => None,
                    Some(m) => match m.as_f64() {
                        Some(m) if (0.0..=1.0).contains(&m) => Some(m),
                        _ => return Err(format!("line {n}: \"mass_removed\" {m} is not a probability")),
                    },
                };
                if !forced && mass_removed.is_none() {
                    return Err(format!("line {n}: a sampled token without \"mass_removed\""));
                }
                trace.tokens.push(Token { step: step("step")?, text: text.to_string(), forced, mass_removed });
            }
        }
    }
    if trace.tokens.is_empty() {
        return Err("no token lines: not a trace from `constrain --trace`".into());
    }
    Ok(trace)
}

/// How a token's text shows under the axis: control characters escaped, spaces as `␣`, at
/// most 10 characters.
pub fn label(text: &str) -> String {
    let shown: String = text
        .chars()
        .flat_map(|c| match c {
            ' ' => vec!['␣'],
            c if c.is_control() => c.escape_default().collect(),
            c => vec![c],
        })
        .collect();
    if shown.chars().count() > 10 {
        let mut cut: String = shown.chars().take(9).collect();
        cut.push('…');
        cut
    } else {
        shown
    }
}

/// The chart's title: steps, forced steps, mean mass removed over the sampled ones.
pub fn title(trace: &Trace) -> String {
    let masses: Vec<f64> = trace.tokens.iter().filter_map(|t| t.mass_removed).collect();
    let forced = trace.tokens.iter().filter(|t| t.forced).count();
    let mean = if masses.is_empty() { 0.0 } else { masses.iter().sum::<f64>() / masses.len() as f64 };
    let backtracks = trace.events.iter().filter(|e| matches!(e, Event::Backtrack(_))).count();
    let mut t = format!(
        "Mask trace: {} steps, {forced} forced, mean mass removed {mean:.3} (over {} sampled)",
        trace.tokens.len(),
        masses.len()
    );
    if backtracks > 0 {
        t.push_str(&format!(", {backtracks} backtrack{}", if backtracks == 1 { "" } else { "s" }));
    }
    t
}

/// Pixels per step, so that every token label has room.
const STEP_PX: u32 = 14;

/// Renders `trace` as an SVG at `path`.
pub fn render(trace: &Trace, path: &Path) -> anyhow::Result<()> {
    let last = trace.tokens.iter().map(|t| t.step).chain(trace.events.iter().map(|&e| match e {
        Event::Closing(s) | Event::Backtrack(s) => s,
    }));
    let n = last.max().unwrap_or(0) + 1;
    let n_i = i32::try_from(n).map_err(|_| anyhow!("too many steps"))?;
    let width = (160 + STEP_PX.saturating_mul(n as u32)).clamp(800, 4000);
    let mut labels = vec![String::new(); n];
    for t in &trace.tokens {
        labels[t.step] = label(&t.text);
    }
    let draw = |e: DrawingAreaErrorKind<_>| anyhow!("cannot draw the chart: {e}");
    let root = SVGBackend::new(path, (width, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(draw)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title(trace), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(96)
        .y_label_area_size(56)
        .build_cartesian_2d((0..n_i - 1).into_segmented(), 0.0..1.05f64)
        .map_err(draw)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_label_formatter(&|_| String::new())
        .y_desc("probability mass removed by the mask")
        .y_max_light_lines(1)
        .draw()
        .map_err(draw)?;
    // The tokens' text, rotated, under the axis: every k-th where they do not all fit. Drawn
    // by hand: the mesh centres rotated labels on the axis, half of them over the bars.
    let (left, base) = chart.backend_coord(&(SegmentValue::Exact(0), 0.0));
    let (right, _) = chart.backend_coord(&(SegmentValue::Exact(n_i), 0.0));
    let every = (STEP_PX as usize * n).div_ceil(usize::try_from((right - left).max(1)).unwrap_or(1)).max(1);
    let style = ("monospace", 11).into_font().transform(FontTransform::Rotate90).color(&BLACK);
    for (i, text) in labels.iter().enumerate().filter(|(i, _)| i % every == 0) {
        let (x, _) = chart.backend_coord(&(SegmentValue::CenterOf(i as i32), 0.0));
        root.draw(&Text::new(text.clone(), (x + 4, base + 6), style.clone())).map_err(draw)?;
    }
    let desc = if every == 1 { "output token".to_string() } else { format!("output token (every {every}th labelled)") };
    let (_, bottom) = root.dim_in_pixel();
    root.draw(&Text::new(
        desc,
        ((left + right) / 2 - 40, bottom as i32 - 16),
        ("sans-serif", 12).into_font().color(&BLACK),
    ))
    .map_err(draw)?;
    let at = |s: usize| SegmentValue::Exact(s as i32);
    let forced = RGBColor(245, 166, 35).mix(0.35);
    chart
        .draw_series(
            trace
                .tokens
                .iter()
                .filter(|t| t.forced)
                .map(|t| Rectangle::new([(at(t.step), 0.0), (at(t.step + 1), 1.05)], forced.filled())),
        )
        .map_err(draw)?
        .label("forced (jump-forward)")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], forced.filled()));
    let bar = RGBColor(31, 119, 180);
    chart
        .draw_series(trace.tokens.iter().filter_map(|t| {
            let m = t.mass_removed.filter(|_| !t.forced)?;
            let mut r = Rectangle::new([(at(t.step), 0.0), (at(t.step + 1), m)], bar.filled());
            r.set_margin(0, 0, 1, 1);
            Some(r)
        }))
        .map_err(draw)?
        .label("sampled: mass removed")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], bar.filled()));
    // Closing wide and under, backtracks thin and over: both show where they coincide.
    for (name, color, width, pick) in [
        ("closing begins", RED, 4, (|e: &Event| matches!(e, Event::Closing(_))) as fn(&Event) -> bool),
        ("backtrack", MAGENTA, 1, |e: &Event| matches!(e, Event::Backtrack(_))),
    ] {
        let steps: Vec<usize> = trace
            .events
            .iter()
            .filter(|e| pick(e))
            .map(|&e| match e {
                Event::Closing(s) | Event::Backtrack(s) => s,
            })
            .collect();
        if steps.is_empty() {
            continue;
        }
        let style = color.stroke_width(width);
        chart
            .draw_series(steps.iter().map(|&s| PathElement::new(vec![(at(s), 0.0), (at(s), 1.05)], style)))
            .map_err(draw)?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(draw)?;
    root.present().map_err(draw)?;
    Ok(())
}

/// Runs `constrain plot`.
pub fn run(args: &PlotArgs) -> Result<ExitCode, Failure> {
    let text = std::fs::read_to_string(&args.trace)
        .with_context(|| format!("cannot read the trace {}", args.trace.display()))
        .map_err(|e| Failure::new(EXIT_OTHER, e))?;
    let trace = parse_trace(&text).map_err(|e| Failure::new(EXIT_OTHER, anyhow!("{}: {e}", args.trace.display())))?;
    let output = args.output.clone().unwrap_or_else(|| args.trace.with_extension("svg"));
    render(&trace, &output)
        .map_err(|e| Failure::new(EXIT_OTHER, e.context(format!("writing {}", output.display()))))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_line() {
        let ok = r#"{"step":0,"token":1,"text":"{","kind":"sampled","allowed":3,"mass_removed":0.5}"#;
        for (text, want) in [
            (format!("{ok}\nnot json"), "line 2: not JSON"),
            (format!("{ok}\n\n[1]"), "line 3: not a JSON object"),
            (format!("{ok}\n{{\"event\":\"nope\",\"step\":1}}"), "line 2: unknown event"),
            (
                format!("{ok}\n{{\"step\":1,\"text\":\"a\",\"kind\":\"sampled\",\"mass_removed\":2}}"),
                "line 2: \"mass_removed\" 2",
            ),
            (format!("{ok}\n{{\"step\":1,\"text\":\"a\",\"kind\":\"sampled\"}}"), "line 2: a sampled token without"),
            (format!("{ok}\n{{\"step\":-1,\"text\":\"a\",\"kind\":\"forced\"}}"), "line 2: no \"step\""),
            (format!("{ok}\n{{\"step\":1e30,\"text\":\"a\",\"kind\":\"forced\"}}"), "line 2: no \"step\""),
            (format!("{ok}\n{{\"step\":99999999999,\"text\":\"a\",\"kind\":\"forced\"}}"), "too large"),
            (format!("{ok}\n{{\"step\":1,\"kind\":\"forced\"}}"), "line 2: no \"text\""),
            (format!("{ok}\n{{\"event\":\"backtrack\",\"step\":1}}"), "line 2: no \"to\""),
            (String::new(), "no token lines"),
            ("\n\n".to_string(), "no token lines"),
        ] {
            let e = parse_trace(&text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn parses_tokens_and_events() {
        let text = r#"{"step":0,"token":1,"text":"{","kind":"forced","allowed":1,"mass_removed":null}
{"event":"closing","step":1}
{"step":1,"token":2,"text":"}","kind":"sampled","allowed":3,"mass_removed":0.25}
"#;
        let t = parse_trace(text).unwrap();
        assert_eq!(t.tokens.len(), 2);
        assert!(t.tokens[0].forced && t.tokens[0].mass_removed.is_none());
        assert_eq!(t.tokens[1].mass_removed, Some(0.25));
        assert_eq!(t.events, vec![Event::Closing(1)]);
        assert_eq!(title(&t), "Mask trace: 2 steps, 1 forced, mean mass removed 0.250 (over 1 sampled)");
    }

    #[test]
    fn labels_escape_and_truncate() {
        assert_eq!(label(" a\n"), "␣a\\n");
        assert_eq!(label("\u{1}"), "\\u{1}");
        assert_eq!(label("abcdefghijkl"), "abcdefghi…");
        assert_eq!(label("é"), "é");
    }
}
