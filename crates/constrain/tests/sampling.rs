//! Property tests for the sampling warpers and the canonical chain (issue 3's invariants).
use constrain::sampling::{self, Sampler, SamplerSettings};
use constrain::TokenId;
use proptest::prelude::*;

const NEG: f32 = f32::NEG_INFINITY;

/// 1..64 finite logits in a realistic range.
fn logits() -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(-20.0f32..20.0, 1..64)
}

/// Logits where some entries are masked out (-inf), at least one left.
fn masked_logits() -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec((-20.0f32..20.0, prop::bool::weighted(0.6)), 1..64).prop_map(|v| {
        let mut out: Vec<f32> = v.iter().map(|&(l, masked)| if masked { NEG } else { l }).collect();
        if out.iter().all(|l| *l == NEG) {
            out[0] = v[0].0;
        }
        out
    })
}

/// Any valid settings, with a fixed seed.
fn settings() -> impl Strategy<Value = SamplerSettings> {
    (
        prop_oneof![Just(0.0f32), 0.05f32..3.0],
        0usize..10,
        0.01f32..=1.0,
        0.0f32..=1.0,
        0.5f32..3.0,
        0usize..8,
        -1.0f32..2.0,
        -1.0f32..2.0,
        any::<u64>(),
    )
        .prop_map(|(t, k, p, minp, rep, last_n, freq, pres, seed)| SamplerSettings {
            temperature: t,
            top_k: k,
            top_p: p,
            min_p: minp,
            repeat_penalty: rep,
            repeat_last_n: last_n,
            frequency_penalty: freq,
            presence_penalty: pres,
            logit_bias: vec![(TokenId(0), 1.5), (TokenId(3), -2.0)],
            seed: Some(seed),
            ..SamplerSettings::default()
        })
}

fn argmax(l: &[f32]) -> usize {
    sampling::argmax(l).expect("a finite logit").index()
}

fn probs(l: &[f32]) -> Vec<f32> {
    let mut p = Vec::new();
    assert!(sampling::softmax(l, &mut p));
    p
}

proptest! {
    #[test]
    fn argmax_survives_top_k(mut l in logits(), k in 1usize..80) {
        let best = argmax(&l);
        sampling::top_k(&mut l, k, &mut Vec::new());
        prop_assert!(l[best].is_finite());
        prop_assert_eq!(argmax(&l), best);
        prop_assert_eq!(l.iter().filter(|x| x.is_finite()).count(), k.min(l.len()));
    }

    #[test]
    fn argmax_survives_top_p(mut l in masked_logits(), p in 0.0001f32..=1.0) {
        let best = argmax(&l);
        sampling::top_p(&mut l, p, &mut Vec::new());
        prop_assert!(l[best].is_finite());
    }

    #[test]
    fn argmax_survives_min_p(mut l in masked_logits(), p in 0.0f32..=1.0) {
        let best = argmax(&l);
        sampling::min_p(&mut l, p);
        prop_assert!(l[best].is_finite());
    }

    #[test]
    fn temperature_never_reorders(l in masked_logits(), t in 0.01f32..100.0) {
        let mut w = l.clone();
        sampling::temperature(&mut w, t);
        for i in 0..l.len() {
            for j in 0..l.len() {
                if l[i] <= l[j] {
                    prop_assert!(w[i] <= w[j], "{} <= {} but {} > {}", l[i], l[j], w[i], w[j]);
                }
            }
            prop_assert_eq!(l[i] == NEG, w[i] == NEG);
        }
    }

    #[test]
    fn small_temperature_is_greedy(mut l in logits(), seed in any::<u64>()) {
        // Make the maximum unique by a clear margin.
        let best = argmax(&l);
        l[best] += 1.0;
        let mut w = l.clone();
        sampling::temperature(&mut w, 1e-3);
        prop_assert!(probs(&w)[best] > 0.999);
        let mut s = Sampler::new(SamplerSettings { temperature: 1e-3, top_k: 0, top_p: 1.0, min_p: 0.0, seed: Some(seed), ..Default::default() }).unwrap();
        prop_assert_eq!(s.sample(&mut l.clone()).unwrap().index(), best);
        let mut g = Sampler::new(SamplerSettings::greedy()).unwrap();
        prop_assert_eq!(g.sample(&mut l).unwrap().index(), best);
    }

    #[test]
    fn zero_temperature_keeps_only_the_argmax(mut l in masked_logits()) {
        let best = argmax(&l);
        sampling::temperature(&mut l, 0.0);
        for (i, x) in l.iter().enumerate() {
            prop_assert_eq!(i == best, x.is_finite());
        }
    }

    #[test]
    fn large_temperature_approaches_uniform(mut l in logits()) {
        let n = l.len() as f32;
        sampling::temperature(&mut l, 1e6);
        for p in probs(&l) {
            prop_assert!((p - 1.0 / n).abs() < 1e-3);
        }
    }

    #[test]
    fn top_k_one_is_greedy(l in masked_logits(), t in 0.1f32..5.0, seed in any::<u64>()) {
        let best = argmax(&l);
        let mut s = Sampler::new(SamplerSettings { temperature: t, top_k: 1, seed: Some(seed), ..Default::default() }).unwrap();
        prop_assert_eq!(s.sample(&mut l.clone()).unwrap().index(), best);
    }

    #[test]
    fn top_p_keeps_the_smallest_prefix_reaching_p(l in masked_logits(), p in 0.01f32..0.999) {
        let before = probs(&l);
        let mut w = l.clone();
        sampling::top_p(&mut w, p, &mut Vec::new());
        // Candidates in order: most likely first, lower id first on ties.
        let mut order: Vec<usize> = (0..l.len()).filter(|&i| l[i] != NEG).collect();
        order.sort_by(|&a, &b| l[b].total_cmp(&l[a]).then(a.cmp(&b)));
        let kept: Vec<usize> = order.iter().copied().take_while(|&i| w[i] != NEG).collect();
        // What is kept is a prefix of that order, and nothing after it is kept.
        prop_assert!(order[kept.len()..].iter().all(|&i| w[i] == NEG));
        let mass: f32 = kept.iter().map(|&i| before[i]).sum();
        prop_assert!(mass >= p - 1e-4, "kept mass {} < p {}", mass, p);
        let without_last = mass - before[*kept.last().unwrap()];
        prop_assert!(without_last < p + 1e-4, "a shorter prefix already reaches p");
        // Kept logits are unchanged.
        for &i in &kept {
            prop_assert_eq!(w[i], l[i]);
        }
    }

    #[test]
    fn penalties_push_a_seen_token_down(mut l in logits(), penalty in 1.01f32..5.0, count in 1u32..5, freq in 0.01f32..2.0, pres in 0.0f32..2.0) {
        let id = l.len() / 2;
        if l[id] == 0.0 { l[id] = 0.5; }
        let before = l[id];
        sampling::repetition_penalty(&mut l, &[(TokenId(id as u32), count)], penalty);
        prop_assert!(l[id] < before);
        let mid = l[id];
        sampling::frequency_presence_penalty(&mut l, &[(TokenId(id as u32), count)], freq, pres);
        prop_assert!(l[id] < mid);
    }

    #[test]
    fn masked_token_is_never_drawn(l in masked_logits(), s in settings(), history in prop::collection::vec(0u32..64, 0..10)) {
        let mut sampler = Sampler::new(s).unwrap();
        for h in history { sampler.accept(TokenId(h)); }
        for _ in 0..4 {
            let t = sampler.sample(&mut l.clone()).unwrap();
            prop_assert!(l[t.index()] != NEG, "drew masked token {}", t.0);
        }
    }

    #[test]
    fn a_single_candidate_is_always_chosen(n in 1usize..64, pick in 0usize..64, x in -20.0f32..20.0, s in settings()) {
        let pick = pick % n;
        let mut l = vec![NEG; n];
        l[pick] = x;
        let mut sampler = Sampler::new(s).unwrap();
        sampler.accept(TokenId(pick as u32));
        prop_assert_eq!(sampler.sample(&mut l).unwrap().index(), pick);
    }

    #[test]
    fn same_seed_same_tokens(l in masked_logits(), s in settings()) {
        let run = |s: SamplerSettings| {
            let mut sampler = Sampler::new(s).unwrap();
            (0..8).map(|_| { let t = sampler.sample(&mut l.clone()).unwrap(); sampler.accept(t); t }).collect::<Vec<_>>()
        };
        prop_assert_eq!(run(s.clone()), run(s));
    }

    #[test]
    fn draw_follows_the_distribution_support(p in prop::collection::vec(prop_oneof![Just(0.0f32), 0.0f32..1.0], 1..32), seed in any::<u64>()) {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        match sampling::draw(&p, &mut rng) {
            Some(t) => prop_assert!(p[t.index()] > 0.0),
            None => prop_assert!(p.iter().all(|x| *x == 0.0)),
        }
    }
}

/// At temperature 1 with no truncation, draw frequencies follow the softmax.
#[test]
fn draws_match_softmax_frequencies() {
    let logits = [0.0f32, 1.0, 2.0, NEG];
    let expected = probs(&logits);
    let mut s = Sampler::new(SamplerSettings {
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        seed: Some(7),
        ..Default::default()
    })
    .unwrap();
    let mut counts = [0usize; 4];
    let n = 20_000;
    for _ in 0..n {
        counts[s.sample(&mut logits.clone()).unwrap().index()] += 1;
    }
    assert_eq!(counts[3], 0);
    for i in 0..3 {
        let f = counts[i] as f32 / n as f32;
        assert!((f - expected[i]).abs() < 0.02, "token {i}: {f} vs {}", expected[i]);
    }
}

/// Speculative sampling's rule on a toy model (no llama.cpp): a grammar mask over eight
/// tokens, a target and a draft with different logits and different warpers, so `p` and
/// `q` are masked, warped distributions that differ (the draft even gives mass to a token
/// the target's top-k drops). Drafting from `q`, then keeping or replacing each draft by
/// [`sampling::accept_draft`] and [`sampling::residual`], must draw tokens distributed as
/// `p`: a chi-square test over 200,000 draws with a fixed seed, against the 0.1% critical
/// value; and the acceptance rate must be `Σ min(p, q)`.
#[test]
fn speculative_rule_keeps_the_target_distribution() {
    let mask = [true, true, false, true, true, true, false, true];
    let masked = |l: [f32; 8]| -> Vec<f32> { l.iter().zip(mask).map(|(&l, m)| if m { l } else { NEG }).collect() };
    let target_logits = masked([2.0, 0.5, 3.0, 1.5, -1.0, 0.0, 4.0, 1.0]);
    let draft_logits = masked([0.5, 2.0, 1.0, 1.0, 1.5, -0.5, 2.0, 0.0]);
    let mut target = Sampler::new(SamplerSettings {
        temperature: 0.8,
        top_k: 5,
        top_p: 1.0,
        min_p: 0.0,
        seed: Some(11),
        ..SamplerSettings::default()
    })
    .unwrap();
    let mut draft =
        Sampler::new(SamplerSettings { temperature: 1.3, seed: Some(12), ..SamplerSettings::default() }).unwrap();
    let (mut p, mut q, mut r) = (Vec::new(), Vec::new(), Vec::new());
    target.distribution(&mut target_logits.clone(), &mut p).unwrap();
    draft.distribution(&mut draft_logits.clone(), &mut q).unwrap();
    assert!(p.iter().zip(&q).any(|(p, q)| *p == 0.0 && *q > 0.0), "the draft covers a token the target drops");
    sampling::residual(&p, &q, &mut r);
    let trials = 200_000;
    let mut counts = [0u64; 8];
    let mut accepted = 0u64;
    for _ in 0..trials {
        let d = draft.draw_from(&q).expect("a draft token");
        let token = if sampling::accept_draft(&p, &q, d, target.uniform()) {
            accepted += 1;
            d
        } else {
            target.draw_from(&r).expect("a residual token")
        };
        counts[token.index()] += 1;
    }
    let mut chi2 = 0.0;
    let mut cells = 0;
    for (i, &c) in counts.iter().enumerate() {
        let expected = p[i] as f64 * trials as f64;
        if expected == 0.0 {
            assert_eq!(c, 0, "token {i} has no target probability but was drawn");
            continue;
        }
        chi2 += (c as f64 - expected).powi(2) / expected;
        cells += 1;
    }
    assert_eq!(cells, 5, "top-k 5 over the six allowed tokens");
    // 0.1% critical value of chi-square with 4 degrees of freedom.
    assert!(chi2 < 18.47, "chi-square {chi2:.2}: {counts:?} against {p:?}");
    let overlap: f32 = p.iter().zip(&q).map(|(p, q)| p.min(*q)).sum();
    let rate = accepted as f32 / trials as f32;
    assert!((rate - overlap).abs() < 0.005, "acceptance {rate} against Σ min(p, q) = {overlap}");
}

/// At temperature 0 both distributions are all on their argmax: a draft is kept exactly
/// when it is the target's greedy token, else the residual is that token.
#[test]
fn speculative_rule_at_temperature_zero_is_greedy() {
    let mut s = Sampler::new(SamplerSettings::greedy()).unwrap();
    let (mut p, mut q, mut r) = (Vec::new(), Vec::new(), Vec::new());
    s.distribution(&mut [1.0, 3.0, 2.0], &mut p).unwrap();
    s.distribution(&mut [1.0, 2.0, 3.0], &mut q).unwrap();
    assert_eq!(p, [0.0, 1.0, 0.0]);
    for u in [0.0, 0.5, 0.999] {
        assert!(!sampling::accept_draft(&p, &q, TokenId(2), u));
        assert!(sampling::accept_draft(&p, &p, TokenId(1), u));
    }
    assert!(sampling::residual(&p, &q, &mut r));
    assert_eq!(r, [0.0, 1.0, 0.0]);
    assert!(!sampling::residual(&p, &p, &mut r), "nothing is left when p = q");
}
