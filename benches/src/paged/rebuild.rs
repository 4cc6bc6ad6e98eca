//! `rebuild` (a confined rebuild of one child vs rebuilding a whole static table) and `growth` (batches into a
//! growing table vs a static table rebuilt for each size).

use super::args::PagedSetup;
use super::common::{
    answers_ok, batch, csv_line, find_timed, lib, one_panel, paged_config, queries, save,
};
use crate::common::median;
use crate::plot::{Series, XAxis};
use hashtile::{BackendChoice, Bcht, HashTable, PagedTable, Placement, TableConfig};
use std::fmt::Write as _;
use std::time::Instant;

/// `rebuild`: `rebuild_child` of one child against clearing and refilling a plain static table.
pub(super) fn rebuild(s: &PagedSetup) -> Result<bool, String> {
    let n = 1usize << s.log2_keys;
    let slots_per_child = (s.child_mib << 20) as usize / 8;
    let children = (n as f64 / 0.75 / slots_per_child as f64).ceil().max(1.0) as usize;
    let mut t: PagedTable<Bcht, u32, u32> = PagedTable::new(paged_config(
        s,
        Placement::HashRouted,
        children.next_power_of_two(),
        usize::MAX,
    ))
    .map_err(lib)?;
    let (k, v) = batch(0, n);
    t.insert(&k, &v).map_err(lib)?;
    let mut child_t = Vec::new();
    for r in 0..s.runs {
        let t0 = Instant::now();
        t.rebuild_child(r % t.children()).map_err(lib)?;
        child_t.push(t0.elapsed().as_secs_f64());
    }
    let q = queries(&k, n / 8);
    let (_, ok1) = find_timed(&mut t, &q, n, &mut vec![0u32; q.len()])?;
    let ok1 = ok1 && t.len() == n;
    let cfg = TableConfig::for_keys(n, 0.75).backend(BackendChoice::Exactly(s.backend));
    let mut plain: HashTable<Bcht, u32, u32> = HashTable::new(cfg).map_err(lib)?;
    plain.insert(&k, &v).map_err(lib)?;
    let mut whole_t = Vec::new();
    for _ in 0..s.runs {
        let t0 = Instant::now();
        plain.clear().map_err(lib)?;
        plain.insert(&k, &v).map_err(lib)?;
        whole_t.push(t0.elapsed().as_secs_f64());
    }
    let mut out = vec![0u32; q.len()];
    plain.find_into(&q, &mut out).map_err(lib)?;
    let ok2 = answers_ok(&q, &out, n) && plain.len() == n;
    let (ct, wt) = (median(&mut child_t), median(&mut whole_t));
    let csv = format!(
        "keys,children,child_keys,child_rebuild_s,whole_rebuild_s,speedup,ok\n{n},{},{},{ct:.5},{wt:.5},{:.1},{}\n",
        t.children(),
        n / t.children(),
        wt / ct,
        ok1 && ok2
    );
    eprintln!(
        "  confined rebuild of one of {} children: {:.2} ms; whole static table of 2^{}: {:.2} ms ({:.1}x)",
        t.children(),
        ct * 1e3,
        s.log2_keys,
        wt * 1e3,
        wt / ct
    );
    save(s, "rebuild", &csv, None)?;
    Ok(ok1 && ok2)
}

/// `growth`: batches into a growing hash-routed table against a static table rebuilt per batch.
pub(super) fn growth(s: &PagedSetup) -> Result<bool, String> {
    let n = 1usize << s.log2_keys;
    let b = 1usize << s.log2_batch.min(s.log2_keys);
    let mut t: PagedTable<Bcht, u32, u32> =
        PagedTable::new(paged_config(s, Placement::HashRouted, 1, usize::MAX)).map_err(lib)?;
    let mut csv = String::from("keys,paged_s,static_rebuild_s,paged_cum_s,static_cum_s\n");
    eprintln!("  growth: children of {} MiB", s.child_mib);
    let (mut pc, mut sc) = (0.0, 0.0);
    let (all_k, all_v) = batch(0, n);
    let mut pts_p = Vec::new();
    let mut pts_s = Vec::new();
    let mut at = 0;
    while at < n {
        let m = b.min(n - at);
        let t0 = Instant::now();
        t.insert(&all_k[at..at + m], &all_v[at..at + m])
            .map_err(lib)?;
        let ps = t0.elapsed().as_secs_f64();
        at += m;
        // The static alternative: a table sized for every key so far, built from all of them.
        let t0 = Instant::now();
        let cfg = TableConfig::for_keys(at, 0.75).backend(BackendChoice::Exactly(s.backend));
        let mut plain: HashTable<Bcht, u32, u32> = HashTable::new(cfg).map_err(lib)?;
        plain.insert(&all_k[..at], &all_v[..at]).map_err(lib)?;
        let ss = t0.elapsed().as_secs_f64();
        pc += ps;
        sc += ss;
        csv_line(
            &mut csv,
            &[
                at.to_string(),
                format!("{ps:.5}"),
                format!("{ss:.5}"),
                format!("{pc:.4}"),
                format!("{sc:.4}"),
            ],
        );
        pts_p.push(((at as f64).log2(), Some(pc)));
        pts_s.push(((at as f64).log2(), Some(sc)));
    }
    let q = queries(&all_k, n / 8);
    let (_, ok) = find_timed(&mut t, &q, n, &mut vec![0u32; q.len()])?;
    let ok = ok && t.len() == n;
    eprintln!(
        "  growth to 2^{} by 2^{}: paged {pc:.2} s ({} children, {} splits), static rebuilt per batch {sc:.2} s ({:.1}x)",
        s.log2_keys,
        s.log2_batch,
        t.children(),
        t.paging().grown,
        sc / pc
    );
    let _ = writeln!(csv, "# speedup {:.2}, ok {ok}", sc / pc);
    let fig = one_panel(
        format!(
            "Growth by batches of 2^{}: paged table vs static table rebuilt per batch, {}",
            s.log2_batch, s.backend
        ),
        "keys stored",
        "cumulative seconds",
        XAxis::Log2,
        vec![
            Series {
                name: "paged (hash-routed, splits)".into(),
                points: pts_p,
            },
            Series {
                name: "static, rebuilt per batch".into(),
                points: pts_s,
            },
        ],
    );
    save(s, &format!("growth_{}mib", s.child_mib), &csv, Some(fig))?;
    Ok(ok)
}
