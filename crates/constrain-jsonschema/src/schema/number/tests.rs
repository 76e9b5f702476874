use super::decimal::*;
use super::multiples::*;
use super::ranges::*;
use super::scientific::*;
use super::*;
use crate::automaton::Pda;
use crate::grammar::GrammarBuilder;
use crate::Limits;

fn pda(e: Expr) -> Pda {
    let mut b = GrammarBuilder::new();
    let r = b.add("root", e);
    Pda::build(&b.build(r).unwrap(), &Limits::default()).unwrap()
}

fn dec(s: &str) -> Dec {
    Dec::parse(s).unwrap()
}

/// Test oracle: whether `v` lies within the bounds, by digit comparison (`cmp_dec`).
fn within(v: &Dec, lo: Option<&Bound>, hi: Option<&Bound>) -> bool {
    use std::cmp::Ordering::*;
    let cmp = |b: &Bound| cmp_dec(v, &b.value);
    lo.is_none_or(|b| cmp(b) == Greater || (cmp(b) == Equal && !b.strict))
        && hi.is_none_or(|b| cmp(b) == Less || (cmp(b) == Equal && !b.strict))
}

#[test]
fn parse_decimals() {
    assert_eq!(dec("12.50"), Dec { neg: false, int: vec![1, 2], frac: vec![5] });
    assert_eq!(dec("-0.0"), Dec { neg: false, int: vec![], frac: vec![] });
    assert_eq!(dec("1.5e2"), Dec { neg: false, int: vec![1, 5, 0], frac: vec![] });
    assert_eq!(dec("25e-3"), Dec { neg: false, int: vec![], frac: vec![0, 2, 5] });
}

#[test]
fn integer_ranges_are_exact() {
    for (lo, hi) in [
        (Some(-15i64), Some(120i64)),
        (Some(0), None),
        (None, Some(-3)),
        (Some(7), Some(7)),
        (Some(10), Some(99)),
        (Some(-100), Some(-10)),
        (Some(1), Some(1000)),
    ] {
        let lod = lo.map(|v| dec(&v.to_string()));
        let hid = hi.map(|v| dec(&v.to_string()));
        let p = pda(int_range(lod.as_ref(), hid.as_ref()));
        for x in -1200i64..1200 {
            let inside = lo.is_none_or(|l| x >= l) && hi.is_none_or(|h| x <= h);
            assert_eq!(p.matches(x.to_string().as_bytes()), inside, "{x} in {lo:?}..{hi:?}");
        }
        assert!(!p.matches(b"007") && !p.matches(b"-0"));
    }
}

#[test]
fn integer_bounds_from_fractions() {
    let b = |s: &str, strict| Bound { value: dec(s), strict };
    let (lo, hi) = integer_bounds(Some(&b("-2.5", false)), Some(&b("3", true)));
    assert_eq!(lo, Some(dec("-2")));
    assert_eq!(hi, Some(dec("2")));
    let (lo, hi) = integer_bounds(Some(&b("0", true)), Some(&b("0.5", false)));
    assert_eq!(lo, Some(dec("1")));
    assert_eq!(hi, Some(dec("0")));
    let (lo, hi) = integer_bounds(Some(&b("-1", true)), Some(&b("-0.5", false)));
    assert_eq!(lo, Some(dec("0")));
    assert_eq!(hi, Some(dec("-1")));
}

/// Bounds on a power of ten, inclusive and exclusive, against scientific spellings at
/// and around them (the fuzzer found `-1e+20` accepted under `exclusiveMaximum: -1e20`).
#[test]
fn scientific_spellings_at_powers_of_ten() {
    for (l, ls, h, hs) in [
        ("", false, "-1e20", true),
        ("", false, "-1e20", false),
        ("1e20", true, "", false),
        ("1e20", false, "", false),
        ("0.01", true, "100", true),
        ("0.01", false, "100", false),
        ("-100", true, "-0.001", false),
    ] {
        let lo = (!l.is_empty()).then(|| Bound { value: dec(l), strict: ls });
        let hi = (!h.is_empty()).then(|| Bound { value: dec(h), strict: hs });
        let p = pda(scientific_range(lo.as_ref(), hi.as_ref()));
        for m in ["1", "1.0", "9.99", "1.0001", "5"] {
            for k in -25i64..=25 {
                for sign in ["", "-"] {
                    let text = format!("{sign}{m}e{k}");
                    let inside = within(&dec(&text), lo.as_ref(), hi.as_ref());
                    assert_eq!(p.matches(text.as_bytes()), inside, "{text} in {l}({ls})..{h}({hs})");
                }
            }
        }
    }
}

/// Equal-length digit ranges are exact, runs of zeros and nines at the edges included.
#[test]
fn fixed_ranges_are_exact() {
    let pairs = [
        ("0000", "9999"),
        ("0001", "9999"),
        ("0010", "9999"),
        ("0000", "9998"),
        ("0000", "9989"),
        ("0012", "9987"),
        ("1000", "9999"),
        ("0999", "9000"),
        ("0005", "0007"),
        ("4500", "4599"),
        ("0000", "0000"),
    ];
    let digits = |t: &str| t.bytes().map(|c| c - b'0').collect::<Vec<u8>>();
    for (a, b) in pairs {
        let p = pda(fixed_range(&digits(a), &digits(b)));
        for x in 0..10_000 {
            let t = format!("{x:04}");
            let inside = a <= t.as_str() && t.as_str() <= b;
            assert_eq!(p.matches(t.as_bytes()), inside, "{t} in {a}..={b}");
        }
    }
    // Bounds of 251 and 300 digits, of any digits, stay within the nesting budget.
    let _ = pda(uint_range(&digits(&format!("1{}1", "0".repeat(249))), None));
    let _ = pda(uint_range(&digits(&"7".repeat(300)), Some(&digits(&"8".repeat(300)))));
}

/// Fraction bounds with runs of zeros (`0.0012`, `1e-300`) are exact, with and without
/// a cap on the fraction digits.
#[test]
fn fraction_bounds_with_zero_runs_are_exact() {
    let b = |s: &str, strict| Bound { value: dec(s), strict };
    let mut samples = vec!["0".to_string(), "1".to_string()];
    for len in 1..=5u32 {
        for f in 0..10u32.pow(len) {
            samples.push(format!("0.{f:0width$}", width = len as usize));
        }
    }
    for (lo, hi) in [
        (Some(b("0.0012", false)), None),
        (Some(b("0.0012", true)), None),
        (None, Some(b("0.0012", false))),
        (None, Some(b("0.0012", true))),
        (Some(b("0.00101", false)), Some(b("0.2", false))),
        (Some(b("0", true)), Some(b("0.00012", true))),
    ] {
        for max in [None, Some(3), Some(4)] {
            let e = number_grid(lo.as_ref(), hi.as_ref(), max);
            let p = (e != Expr::Nothing).then(|| pda(e));
            for t in &samples {
                let digits = t.split_once('.').map_or(0, |(_, f)| f.len());
                let want = within(&dec(t), lo.as_ref(), hi.as_ref()) && max.is_none_or(|m| digits <= m);
                let matched = p.as_ref().is_some_and(|p| p.matches(t.as_bytes()));
                assert_eq!(matched, want, "{t} in {lo:?}..{hi:?}, at most {max:?} digits");
            }
        }
    }
    // Bounds of 300 zeros stay within the nesting budget.
    let tiny = b("4.9e-324", true);
    let _ = pda(number_range(Some(&tiny), None));
    let _ = pda(number_range(None, Some(&b("1e-300", false))));
    let _ = pda(number_range(Some(&b("0", false)), Some(&b(&format!("1.{}", "7".repeat(400)), false))));
}

/// Large integers in exponent form are integers within the bounds, and the ones
/// serializers print are there whenever the bounds allow them.
#[test]
fn large_integers_are_integers_within_bounds() {
    let b = |s: &str, strict| Some(Bound { value: dec(s), strict });
    let bounds = [
        (None, None),
        (b("0", false), None),
        (b("0", true), None),
        (b("1", false), None),
        (b("-5e30", false), None),
        (b("1e16", true), None),
        (None, b("0", false)),
        (None, b("10", false)),
        (None, b("-1e16", false)),
        (b("1", false), b("1e40", false)),
    ];
    let mantissas = ["1", "9", "2.5", "2.8597758676078116", "1.00000000000000001", "7.0"];
    let exponents = ["e15", "e16", "E16", "e+018", "e-16", "e307", "e308", "e0400"];
    for (lo, hi) in &bounds {
        let e = large_integers(lo.as_ref(), hi.as_ref());
        let p = (e != Expr::Nothing).then(|| pda(e));
        for sign in ["", "-"] {
            for m in mantissas {
                for e in exponents {
                    let text = format!("{sign}{m}{e}");
                    let v = dec(&text.replace("e0400", "e400"));
                    let exponent = e.trim_start_matches(['e', 'E', '+', '0']).parse::<i64>();
                    let below_1_7 = Bound { value: dec("1.7"), strict: true };
                    let shape = m.len() <= 18
                        && exponent.is_ok_and(|x| {
                            (16..=307).contains(&x) || (x == 308 && within(&dec(m), None, Some(&below_1_7)))
                        });
                    let sound = shape && v.is_integer() && within(&v, lo.as_ref(), hi.as_ref());
                    // The documented subset: a sign is spelled when its side is unbounded
                    // and the other bound leaves every value of magnitude 10^16 and more.
                    let spelled = shape
                        && if sign.is_empty() {
                            hi.is_none() && within(&dec("1e16"), lo.as_ref(), None)
                        } else {
                            lo.is_none() && within(&dec("-1e16"), None, hi.as_ref())
                        };
                    let matched = p.as_ref().is_some_and(|p| p.matches(text.as_bytes()));
                    assert!(!matched || sound, "{text} accepted in {lo:?}..{hi:?}");
                    assert!(matched || !spelled, "{text} refused in {lo:?}..{hi:?}");
                }
            }
        }
    }
}

#[test]
fn number_ranges_are_exact() {
    let cases = [
        ("0", false, "1", false),
        ("0", true, "1", true),
        ("-1.5", false, "2.25", true),
        ("0.1", false, "0.15", false),
        ("-10", true, "-0.5", false),
        ("2", false, "", false),
        ("", false, "-0.01", true),
    ];
    let samples: Vec<String> = (-120..=120)
        .flat_map(|i| {
            let x = i as f64 / 8.0;
            vec![format!("{}", x), format!("{:.1}", x), format!("{:.3}", x)]
        })
        .chain(
            [
                "0.0",
                "0.15",
                "0.150",
                "0.1500001",
                "0.1",
                "2.25",
                "2.2500",
                "-0.5",
                "-0.50",
                "-0.01",
                "-0.010",
                "-0.0099",
            ]
            .map(String::from),
        )
        .collect();
    for (l, ls, h, hs) in cases {
        let lo = (!l.is_empty()).then(|| Bound { value: dec(l), strict: ls });
        let hi = (!h.is_empty()).then(|| Bound { value: dec(h), strict: hs });
        let p = pda(number_range(lo.as_ref(), hi.as_ref()));
        for s in &samples {
            let x: f64 = s.parse().unwrap();
            let lf: Option<f64> = lo.as_ref().map(|_| l.parse().unwrap());
            let hf: Option<f64> = hi.as_ref().map(|_| h.parse().unwrap());
            let inside = lf.is_none_or(|v| if ls { x > v } else { x >= v })
                && hf.is_none_or(|v| if hs { x < v } else { x <= v });
            let canonical =
                !s.starts_with("-0") || s.trim_start_matches("-0").trim_start_matches('.').chars().any(|c| c != '0');
            if canonical {
                assert_eq!(p.matches(s.as_bytes()), inside, "{s} in {l}({ls})..{h}({hs})");
            } else {
                assert!(!p.matches(s.as_bytes()) || inside, "{s}");
            }
        }
    }
}

#[test]
fn multiples_regular_last_digit() {
    let p = pda(multiples_regular(5, 0).unwrap());
    assert!(p.matches(b"0") && p.matches(b"15") && p.matches(b"-20") && p.matches(b"5"));
    assert!(!p.matches(b"12") && !p.matches(b"05") && !p.matches(b"-0"));
    let p = pda(multiples_regular(1, 2).unwrap());
    assert!(p.matches(b"0") && p.matches(b"300") && !p.matches(b"30") && !p.matches(b"00"));
    assert!(multiples_regular(7, 0).is_none());
}

#[test]
fn steps_split_exactly() {
    assert_eq!(Step::of(&dec("1e20")), Step { q: vec![1], t: 20 });
    assert_eq!(Step::of(&dec("0.01")), Step { q: vec![1], t: -2 });
    assert_eq!(Step::of(&dec("1.5")), Step { q: vec![1, 5], t: -1 });
    assert_eq!(Step::of(&dec("0.123456789")).for_integers(), Step { q: vec![1, 2, 3, 4, 5, 6, 7, 8, 9], t: 0 });
    // 1.5 = 15/10: an integer multiple of 1.5 is a multiple of 3.
    assert_eq!(Step::of(&dec("1.5")).for_integers(), Step { q: vec![3], t: 0 });
    assert_eq!(Step::of(&dec("1e-8")).for_integers(), Step { q: vec![1], t: 0 });
    assert_eq!(dec("12.5").shift(3).to_text(), "12500");
    assert_eq!(dec("-12.5").shift(-3).to_text(), "-0.0125");
    assert_eq!(Dec::from_i128(-120).to_text(), "-120");
    assert_eq!(dec("12345678901234567890123").to_i128(), Some(12345678901234567890123));
}

/// Exact oracle: whether the number spelled `x` lies in the bounds and is a multiple of
/// `m` (decimal text), computed on digit strings (no floats).
fn oracle(x: &str, lo: Option<(&str, bool)>, hi: Option<(&str, bool)>, m: Option<&str>, integer: bool) -> bool {
    let v = dec(x);
    let bound = |(b, strict): (&str, bool)| Bound { value: dec(b), strict };
    let in_bounds = within(&v, lo.map(bound).as_ref(), hi.map(bound).as_ref());
    let multiple = m.is_none_or(|m| {
        let m = dec(m);
        // Scale both to integers with the same number of fraction digits, then divide.
        let k = v.frac.len().max(m.frac.len());
        let digits = |d: &Dec| {
            let mut f = d.frac.clone();
            f.resize(k, 0);
            d.int.iter().chain(&f).copied().collect::<Vec<u8>>()
        };
        let md: u128 = digits(&m).iter().fold(0u128, |a, &d| a * 10 + d as u128);
        let r = digits(&v).iter().fold(0u128, |a, &d| (a * 10 + d as u128) % md);
        r == 0
    });
    in_bounds && multiple && (!integer || v.is_integer())
}

/// Candidate spellings: integers and decimals around the interesting values, big ones,
/// non-canonical spellings and exponents.
fn candidates(around: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for i in -60i64..=60 {
        out.push(i.to_string());
        for f in ["5", "25", "01", "0001", "5001", "0", "50", "99"] {
            out.push(format!("{}{}.{f}", if i < 0 { "-" } else { "" }, i.unsigned_abs()));
            if i == 0 {
                out.push(format!("-0.{f}"));
            }
        }
    }
    for a in around {
        let d = dec(a);
        for delta in ["0", "1", "0.5", "0.01", "0.0001", "1e20", "3", "7", "1.5", "100"] {
            for sign in [false, true] {
                let mut dd = dec(delta);
                dd.neg = sign && !dd.is_zero();
                out.push(add(&d, &dd).to_text());
            }
        }
    }
    out.extend(
        [
            "1e2",
            "1E2",
            "-1e-2",
            "1.0e1",
            "00",
            "-0",
            "1.",
            ".5",
            "1.500",
            "100000000000000000000",
            "200000000000000000000",
            "150000000000000000000",
            "100000000000000000000.0",
        ]
        .map(String::from),
    );
    // Scientific spellings of each plain one (`1.25e+02`, `-5E-3`), and zero with a minus.
    let sci: Vec<String> = out.iter().filter_map(|c| Dec::parse(c)).flat_map(|d| scientific(&d)).collect();
    out.extend(sci);
    out.extend(["-0", "-0.0", "-0.000", "-0e0"].map(String::from));
    out.sort();
    out.dedup();
    out
}

/// `d` in scientific notation, as Python (`1.5e-07`, `1e+20`) and Rust (`1.5e-7`,
/// `1E20`) print it; none for zero.
pub(super) fn scientific(d: &Dec) -> Vec<String> {
    if d.is_zero() {
        return vec![];
    }
    let k = decade(d);
    let digits: Vec<u8> = d.int.iter().chain(&d.frac).copied().skip_while(|&x| x == 0).collect();
    let mut m = format!("{}{}", if d.neg { "-" } else { "" }, digits[0]);
    let rest: String = digits[1..].iter().map(|x| (x + b'0') as char).collect();
    let rest = rest.trim_end_matches('0');
    if !rest.is_empty() {
        m = format!("{m}.{rest}");
    }
    let sign = if k < 0 { '-' } else { '+' };
    vec![format!("{m}e{sign}{:02}", k.abs()), format!("{m}E{k}")]
}

/// Whether `c` is a spelling every compiled number or integer schema must accept when
/// its value is inside: canonical plain decimals; scientific notation and `-0.0` for
/// numbers without `multipleOf`; `-0` always, `-0.0` for integers (draft 2020-12).
fn must_accept(c: &str, v: &Dec, integer: bool, multiple: bool) -> bool {
    let sci = c.contains(['e', 'E']) && scientific(v).iter().any(|s| s == c);
    v.to_text() == c || c == "-0" || (c == "-0.0" && (integer || !multiple)) || (sci && !integer && !multiple)
}

/// Exact sum of two decimals (test helper; digit strings, no floats).
fn add(a: &Dec, b: &Dec) -> Dec {
    let k = a.frac.len().max(b.frac.len());
    let as_int = |d: &Dec| -> i128 {
        let mut f = d.frac.clone();
        f.resize(k, 0);
        let v = d.int.iter().chain(&f).fold(0i128, |acc, &x| acc * 10 + x as i128);
        if d.neg {
            -v
        } else {
            v
        }
    };
    Dec::from_i128(as_int(a) + as_int(b)).shift(-(k as i64))
}

/// Compiles a schema from text (so numbers keep their digits) and checks every candidate
/// against the oracle: nothing outside the set is accepted, and every canonical spelling
/// (`Dec::to_text`) inside it is.
fn check_exact(
    schema: &str,
    lo: Option<(&str, bool)>,
    hi: Option<(&str, bool)>,
    m: Option<&str>,
    integer: bool,
    extra: &[&str],
) {
    let value: serde_json::Value = serde_json::from_str(schema).unwrap();
    let g = crate::compile(&value, &crate::schema::Options::default().with_runtime_checks(false))
        .unwrap_or_else(|e| panic!("{schema}: {e}"));
    let p = Pda::build(g.grammar(), &Limits::default()).unwrap();
    let mut around: Vec<&str> = extra.to_vec();
    around.extend(lo.map(|l| l.0));
    around.extend(hi.map(|h| h.0));
    around.extend(m);
    let mut accepted = 0;
    for c in candidates(&around) {
        let Some(v) = Dec::parse(&c) else { continue };
        let valid_json = serde_json::from_str::<serde_json::Value>(&c).is_ok_and(|v| v.is_number());
        let inside = valid_json && oracle(&c, lo, hi, m, integer);
        let got = p.matches(c.as_bytes());
        assert!(!got || inside, "{schema} accepts {c}, outside the set");
        if inside && v.to_text() == c {
            assert!(got, "{schema} rejects canonical {c}");
        }
        accepted += got as usize;
    }
    assert!(accepted > 0, "{schema} accepted no candidate");
}

#[test]
fn big_integers_and_decimals_are_exact() {
    check_exact(
        r#"{"type": "integer", "minimum": 18446744073709551616, "maximum": 18446744073709551716}"#,
        Some(("18446744073709551616", false)),
        Some(("18446744073709551716", false)),
        None,
        true,
        &[],
    );
    check_exact(
        r#"{"type": "integer", "maximum": -9223372036854775809, "exclusiveMinimum": -9223372036854775909}"#,
        Some(("-9223372036854775909", true)),
        Some(("-9223372036854775809", false)),
        None,
        true,
        &[],
    );
    check_exact(
        r#"{"type": "number", "exclusiveMaximum": 972783798187987123879878123.18878137}"#,
        None,
        Some(("972783798187987123879878123.18878137", true)),
        None,
        false,
        &["972783798187987123879878123.188781371", "972783798187987123879878123.18878136"],
    );
    check_exact(
        r#"{"type": "number", "minimum": 0.1000000000000000055511151231257827}"#,
        Some(("0.1000000000000000055511151231257827", false)),
        None,
        None,
        false,
        &["0.1", "0.10000000000000000555111512312578271"],
    );
}

#[test]
fn multiple_of_is_exact() {
    check_exact(r#"{"type": "integer", "multipleOf": 1e20}"#, None, None, Some("100000000000000000000"), true, &[]);
    check_exact(
        r#"{"type": "integer", "multipleOf": 1e20, "minimum": -3e20, "exclusiveMaximum": 2e20}"#,
        Some(("-300000000000000000000", false)),
        Some(("200000000000000000000", true)),
        Some("100000000000000000000"),
        true,
        &[],
    );
    check_exact(r#"{"multipleOf": 0.01}"#, None, None, Some("0.01"), false, &["1.23", "1.235"]);
    check_exact(
        r#"{"type": "number", "multipleOf": 0.01, "minimum": -1.5, "exclusiveMaximum": 2.345}"#,
        Some(("-1.5", false)),
        Some(("2.345", true)),
        Some("0.01"),
        false,
        &["2.34", "2.35", "-1.49", "-1.51"],
    );
    check_exact(
        r#"{"type": "number", "multipleOf": 0.0001}"#,
        None,
        None,
        Some("0.0001"),
        false,
        &["0.00751", "0.0075"],
    );
    check_exact(
        r#"{"type": "number", "multipleOf": 0.0001, "minimum": 0, "maximum": 1}"#,
        Some(("0", false)),
        Some(("1", false)),
        Some("0.0001"),
        false,
        &["0.00751", "0.0075", "0.99999"],
    );
    check_exact(
        r#"{"type": "number", "multipleOf": 1.5, "minimum": -10, "maximum": 100}"#,
        Some(("-10", false)),
        Some(("100", false)),
        Some("1.5"),
        false,
        &["4.5", "35", "7.5", "99"],
    );
    check_exact(
        r#"{"type": "integer", "multipleOf": 1.5, "minimum": -10, "maximum": 100}"#,
        Some(("-10", false)),
        Some(("100", false)),
        Some("1.5"),
        true,
        &["4.5", "6", "9"],
    );
    check_exact(
        r#"{"type": "integer", "multipleOf": 7, "minimum": 100000000000000000000, "maximum": 100000000000000000500}"#,
        Some(("100000000000000000000", false)),
        Some(("100000000000000000500", false)),
        Some("7"),
        true,
        &["100000000000000000002", "100000000000000000009"],
    );
    check_exact(r#"{"type": "integer", "multipleOf": 2}"#, None, None, Some("2"), true, &[]);
}

#[test]
fn small_multiples_in_scientific_notation_are_exact() {
    // (schema, lower bound, upper bound, step)
    type Side<'a> = Option<(&'a str, bool)>;
    let cases: [(&str, Side, Side, &str); 6] = [
        (r#"{"type": "number", "multipleOf": 0.00001}"#, None, None, "0.00001"),
        (r#"{"type": "number", "multipleOf": 1e-7, "minimum": 0}"#, Some(("0", false)), None, "0.0000001"),
        (
            r#"{"type": "number", "multipleOf": 0.001, "exclusiveMinimum": -1, "maximum": 1}"#,
            Some(("-1", true)),
            Some(("1", false)),
            "0.001",
        ),
        (
            r#"{"type": "number", "multipleOf": 0.000001, "minimum": 0.00002, "maximum": 0.5}"#,
            Some(("0.00002", false)),
            Some(("0.5", false)),
            "0.000001",
        ),
        (
            r#"{"type": "number", "multipleOf": 0.00001, "exclusiveMaximum": 0.001}"#,
            None,
            Some(("0.001", true)),
            "0.00001",
        ),
        (
            r#"{"type": "number", "multipleOf": 0.00001, "exclusiveMinimum": 0.0001}"#,
            Some(("0.0001", true)),
            None,
            "0.00001",
        ),
    ];
    let mantissas = ["1", "2.5", "9.99", "1.0", "1.50", "3.000", "7.0001", "5.25", "10", "0.5"];
    for (schema, lo, hi, m) in cases {
        let value: serde_json::Value = serde_json::from_str(schema).unwrap();
        let g = crate::compile(&value, &crate::schema::Options::default().with_runtime_checks(false))
            .unwrap_or_else(|e| panic!("{schema}: {e}"));
        let p = Pda::build(g.grammar(), &Limits::default()).unwrap();
        let mut accepted = 0;
        for sign in ["", "-"] {
            for mantissa in mantissas {
                for k in 1..=9 {
                    for exp in [format!("e-{k}"), format!("E-0{k}"), format!("e-00{k}"), format!("e{k}")] {
                        let c = format!("{sign}{mantissa}{exp}");
                        let inside = oracle(&c, lo, hi, Some(m), false);
                        let got = p.matches(c.as_bytes());
                        assert!(!got || inside, "{schema} accepts {c}, outside the set");
                        // Serializers' spellings (one leading digit, no trailing zero).
                        let printed = !mantissa.ends_with('0') && !mantissa.starts_with('0') && exp.contains('-');
                        if inside
                            && printed
                            && (lo.is_none_or(|l| l.0.starts_with('-') || l.0 == "0") || sign.is_empty())
                        {
                            let decade_inside =
                                hi.is_none_or(|h| h.0 == "1") && lo.is_none_or(|l| l.0 == "0" || l.0 == "-1");
                            assert!(!decade_inside || got, "{schema} rejects {c}");
                        }
                        accepted += got as usize;
                    }
                }
            }
        }
        assert!(accepted > 0, "{schema} accepted no candidate");
    }
}

#[test]
fn remainder_automata_are_exact() {
    check_exact(r#"{"type": "integer", "multipleOf": 7}"#, None, None, Some("7"), true, &["700", "-7007", "1001"]);
    check_exact(
        r#"{"type": "integer", "multipleOf": 3, "minimum": 0}"#,
        Some(("0", false)),
        None,
        Some("3"),
        true,
        &["123456789", "-3"],
    );
    check_exact(
        r#"{"type": "integer", "multipleOf": 12, "exclusiveMaximum": 0.5}"#,
        None,
        Some(("0.5", true)),
        Some("12"),
        true,
        &["-144", "-1200", "12"],
    );
    check_exact(r#"{"type": "integer", "multipleOf": 300}"#, None, None, Some("300"), true, &["900", "-1200", "1000"]);
    check_exact(
        r#"{"type": "number", "multipleOf": 1.5}"#,
        None,
        None,
        Some("1.5"),
        false,
        &["4.5", "35", "-7.5", "1.05"],
    );
    check_exact(
        r#"{"type": "number", "multipleOf": 0.25, "minimum": 0}"#,
        Some(("0", false)),
        None,
        Some("0.25"),
        false,
        &["12.75", "0.125", "-0.25"],
    );
    // Found by the property test: `0.25` is not at most 0.
    check_exact(
        r#"{"type": "number", "maximum": 0, "multipleOf": 0.25}"#,
        None,
        Some(("0", false)),
        Some("0.25"),
        false,
        &["0.25", "-0.25", "-12.75"],
    );
    check_exact(
        r#"{"type": "number", "multipleOf": 0.07}"#,
        None,
        None,
        Some("0.07"),
        false,
        &["0.21", "1.4", "-0.7", "0.2"],
    );
    check_exact(
        r#"{"type": "integer", "multipleOf": 0.0123}"#,
        None,
        None,
        Some("0.0123"),
        true,
        &["123", "-246", "1230"],
    );
}

#[test]
fn unbounded_moduli_are_refused_not_dropped() {
    let compile = |s: &str| {
        crate::compile(&serde_json::from_str(s).unwrap(), &crate::schema::Options::default().with_runtime_checks(false))
    };
    for s in [
        r#"{"type": "integer", "multipleOf": 1234567}"#,
        r#"{"type": "integer", "multipleOf": 7, "minimum": 5}"#,
        r#"{"multipleOf": 0.123456789}"#,
        r#"{"type": "integer", "multipleOf": 0.123456789}"#,
        r#"{"type": "number", "multipleOf": 1.5, "minimum": -1e30, "maximum": 1e30}"#,
        r#"{"type": "integer", "multipleOf": 1e500}"#,
    ] {
        let e = compile(s).err().unwrap_or_else(|| panic!("{s} compiled"));
        assert_eq!(e.keyword(), "multipleOf", "{s}: {e}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 200, ..Default::default() })]
    /// Random bounds, types and steps compiled from schema text: whatever compiles accepts
    /// no candidate outside the exact set and every canonical candidate inside it.
    #[test]
    fn random_number_schemas_are_exact(
        lo in proptest::option::of(("-?(0|[1-9][0-9]{0,21})(\\.[0-9]{1,3})?", proptest::bool::ANY)),
        hi in proptest::option::of(("-?(0|[1-9][0-9]{0,21})(\\.[0-9]{1,3})?", proptest::bool::ANY)),
        integer in proptest::bool::ANY,
        m in proptest::option::of(proptest::sample::select(vec!["0.01", "0.5", "1.5", "7", "0.25", "1e20", "3", "0.0001", "12", "0.07"])),
        picked in proptest::collection::vec("-?(0|[1-9][0-9]{0,21})(\\.[0-9]{1,4})?", 40),
    ) {
        let mut schema = format!(r#"{{"type": "{}""#, if integer { "integer" } else { "number" });
        if let Some((l, strict)) = &lo {
            schema += &format!(r#", "{}": {l}"#, if *strict { "exclusiveMinimum" } else { "minimum" });
        }
        if let Some((h, strict)) = &hi {
            schema += &format!(r#", "{}": {h}"#, if *strict { "exclusiveMaximum" } else { "maximum" });
        }
        if let Some(m) = m {
            schema += &format!(r#", "multipleOf": {m}"#);
        }
        schema += "}";
        let value: serde_json::Value = serde_json::from_str(&schema).unwrap();
        if let Ok(g) = crate::compile(&value, &crate::schema::Options::default().with_runtime_checks(false)) {
            // An empty set does not build (`Empty`): then every candidate must be outside.
            let p = Pda::build(g.grammar(), &Limits::default()).ok();
            let lo_b = lo.as_ref().map(|(l, s)| (l.as_str(), *s));
            let hi_b = hi.as_ref().map(|(h, s)| (h.as_str(), *s));
            let mut around: Vec<&str> = picked.iter().map(|x| x.as_str()).collect();
            around.extend(lo_b.map(|l| l.0));
            around.extend(hi_b.map(|h| h.0));
            for c in candidates(&around).into_iter().chain(picked.iter().cloned()) {
                let Some(v) = Dec::parse(&c) else { continue };
                let valid_json = serde_json::from_str::<serde_json::Value>(&c).is_ok_and(|v| v.is_number());
                let m_exact = m.map(|m| dec(m).to_text());
                let inside = valid_json && oracle(&c, lo_b, hi_b, m_exact.as_deref(), integer);
                let got = p.as_ref().is_some_and(|p| p.matches(c.as_bytes()));
                proptest::prop_assert!(!got || inside, "{} accepts {}, outside the set", schema, c);
                if inside && must_accept(&c, &v, integer || m.is_some_and(|m| dec(m).is_integer()), m.is_some()) {
                    proptest::prop_assert!(got, "{} rejects {}", schema, c);
                }
            }
        }
    }
}
