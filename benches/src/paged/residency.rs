//! `residency` (rates vs resident children, beside a plain table and the pinned copy ceiling) and `skew`
//! (concentrated vs uniform finds under a budget of a quarter of the children).

use super::args::PagedSetup;
use super::common::{
    answers_ok, batch, ceiling, csv_line, fill, fill_keys, find_runs, find_timed, lib, one_panel,
    paged_config, pinned_gbs, queries, save,
};
use crate::common::median;
use crate::plot::{Series, XAxis};
use hashtile::{BackendChoice, Bcht, HashTable, PagedTable, Placement, TableConfig};
use std::time::Instant;

/// `residency`: rates vs resident children, beside the plain table and the pinned copy ceiling.
pub(super) fn residency(s: &PagedSetup) -> Result<bool, String> {
    let c = s.children;
    let n = fill_keys(s, c);
    let b = (n / 8).max(1);
    let ceil = ceiling(s.backend)?;
    let pinned = pinned_gbs(&ceil);
    let mut csv = String::from(
        "table,placement,children,resident,op,keys,seconds,M_keys_per_s,swap_GB,swap_GB_per_s,pinned_GB_per_s,of_pinned,ok\n",
    );
    let mut all_ok = true;
    let (stored, _) = batch(0, n);
    let q = queries(&stored, n / 8);
    let mut series = Vec::new();
    for &placement in &s.placements {
        let mut build_pts = Vec::new();
        let mut find_pts = Vec::new();
        let budgets = if s.all_resident_only {
            vec![c]
        } else {
            vec![c / 4, c / 2, 3 * c / 4, c]
        };
        for x in budgets {
            let x = x.max(1);
            let mut t: PagedTable<Bcht, u32, u32> =
                PagedTable::new(paged_config(s, placement, c, x)).map_err(lib)?;
            let before = t.paging().bytes_moved;
            let secs = fill(n, b, |k, v| t.insert(k, v))?;
            let moved = (t.paging().bytes_moved - before) as f64 / 1e9;
            let ok = t.len() == n;
            let rate = n as f64 / secs / 1e6;
            build_pts.push((x as f64, ok.then_some(rate)));
            let row = |op: &str, keys: usize, secs: f64, moved: f64, ok: bool| {
                vec![
                    "paged".into(),
                    format!("{placement:?}"),
                    c.to_string(),
                    x.to_string(),
                    op.into(),
                    keys.to_string(),
                    format!("{secs:.4}"),
                    format!("{:.1}", keys as f64 / secs / 1e6),
                    format!("{moved:.3}"),
                    format!("{:.2}", moved / secs),
                    format!("{pinned:.2}"),
                    format!("{:.3}", moved / secs / pinned),
                    ok.to_string(),
                ]
            };
            csv_line(&mut csv, &row("insert", n, secs, moved, ok));
            let (fs, fmoved, fok) = find_runs(&mut t, &q, n, s.runs)?;
            csv_line(&mut csv, &row("find", q.len(), fs, fmoved, fok));
            find_pts.push((x as f64, fok.then_some(q.len() as f64 / fs / 1e6)));
            all_ok &= ok && fok;
            eprintln!(
                "  {placement:?} x={x}/{c}: insert {rate:.1} M keys/s ({moved:.2} GB swapped), find {:.1} M keys/s",
                q.len() as f64 / fs / 1e6
            );
        }
        series.push(Series {
            name: format!("{placement:?} insert"),
            points: build_pts,
        });
        series.push(Series {
            name: format!("{placement:?} find"),
            points: find_pts,
        });
    }
    // Every child resident against the plain static table of the same slots, in the same run and
    // interleaved: fresh tables filled in turn, then finds in turn (the H100 host's copy rates drift within a
    // run and between runs; interleaved runs see the same conditions). Medians of `runs` each.
    let placement = s.placements[0];
    let slots = (s.child_mib << 20) as usize / 8 * c;
    let cfg = TableConfig::with_capacity(slots).backend(BackendChoice::Exactly(s.backend));
    let (mut paged_ins, mut plain_ins) = (Vec::new(), Vec::new());
    let mut tables = None;
    for _ in 0..s.runs.max(1) {
        drop(tables.take()); // the previous run's tables are freed first
        let mut paged: PagedTable<Bcht, u32, u32> =
            PagedTable::new(paged_config(s, placement, c, c)).map_err(lib)?;
        paged_ins.push(fill(n, b, |k, v| paged.insert(k, v))?);
        let mut plain: HashTable<Bcht, u32, u32> = HashTable::new(cfg.clone()).map_err(lib)?;
        plain_ins.push(fill(n, b, |k, v| plain.insert(k, v))?);
        all_ok &= paged.len() == n && plain.len() == n;
        tables = Some((paged, plain));
    }
    let (mut paged, plain) = tables.expect("at least one run");
    let (mut paged_find, mut plain_find) = (Vec::new(), Vec::new());
    let (mut paged_out, mut plain_out) = (vec![0u32; q.len()], vec![0u32; q.len()]);
    for _ in 0..s.runs.max(1) {
        let (secs, ok) = find_timed(&mut paged, &q, n, &mut paged_out)?;
        paged_find.push(secs);
        all_ok &= ok;
        let t0 = Instant::now();
        plain.find_into(&q, &mut plain_out).map_err(lib)?;
        plain_find.push(t0.elapsed().as_secs_f64());
        all_ok &= answers_ok(&q, &plain_out, n);
    }
    let rows = [
        ("paged (interleaved)", "insert", n, median(&mut paged_ins)),
        ("plain", "insert", n, median(&mut plain_ins)),
        (
            "paged (interleaved)",
            "find",
            q.len(),
            median(&mut paged_find),
        ),
        ("plain", "find", q.len(), median(&mut plain_find)),
    ];
    for (table, op, keys, secs) in rows {
        let paged_row = table != "plain";
        csv_line(
            &mut csv,
            &[
                table.into(),
                if paged_row {
                    format!("{placement:?}")
                } else {
                    "-".into()
                },
                if paged_row { c.to_string() } else { "1".into() },
                if paged_row { c.to_string() } else { "1".into() },
                op.into(),
                keys.to_string(),
                format!("{secs:.4}"),
                format!("{:.1}", keys as f64 / secs / 1e6),
                "0".into(),
                "0".into(),
                format!("{pinned:.2}"),
                "0".into(),
                all_ok.to_string(),
            ],
        );
        if !paged_row {
            series.push(Series {
                name: format!("plain table {op}"),
                points: [c / 4, c]
                    .iter()
                    .map(|&x| (x.max(1) as f64, Some(keys as f64 / secs / 1e6)))
                    .collect(),
            });
        }
    }
    let rate = |i: usize| rows[i].2 as f64 / rows[i].3 / 1e6;
    eprintln!(
        "  plain table: insert {:.1} M keys/s, find {:.1} M keys/s; pinned ceiling {pinned:.1} GB/s",
        rate(1),
        rate(3)
    );
    eprintln!(
        "  {placement:?}, all {c} resident, interleaved with the plain table ({} runs, medians): insert {:.1} M keys/s ({:.3}x), find {:.1} M keys/s ({:.3}x)",
        s.runs.max(1),
        rate(0),
        rate(0) / rate(1),
        rate(2),
        rate(2) / rate(3)
    );
    let fig = one_panel(
        format!(
            "Paged BCHT: {c} children of {} MiB, 2^{:.1} keys, rates vs resident children, {}",
            s.child_mib,
            (n as f64).log2(),
            s.backend
        ),
        "resident children",
        "M keys/s (host data)",
        XAxis::Linear,
        series,
    );
    save(s, "residency", &csv, Some(fig))?;
    Ok(all_ok)
}

/// `skew`: finds at a budget of a quarter of the children, concentrated on resident children vs uniform.
pub(super) fn skew(s: &PagedSetup) -> Result<bool, String> {
    let c = s.children;
    let n = fill_keys(s, c);
    let x = (c / 4).max(1);
    let mut csv = String::from("placement,queries,keys,seconds,M_keys_per_s,swap_GB,ok\n");
    let mut all_ok = true;
    let mut series = Vec::new();
    for &placement in &s.placements {
        let mut t: PagedTable<Bcht, u32, u32> =
            PagedTable::new(paged_config(s, placement, c, x)).map_err(lib)?;
        fill(n, (n / 8).max(1), |k, v| t.insert(k, v))?;
        let (stored, _) = batch(0, n);
        let m = n / 4;
        let hot: Vec<u32> = match placement {
            Placement::HashRouted => {
                let resident = t.resident_children();
                stored
                    .iter()
                    .copied()
                    .filter(|&k| resident.contains(&t.child_of(k).expect("routed")))
                    .take(m)
                    .collect()
            }
            // The newest keys live in the last children, which the fill left resident.
            Placement::ArrivalOrder => stored[n - m..].to_vec(),
        };
        let uniform: Vec<u32> = (0..m).map(|i| stored[(i * 4 + 1) % n]).collect();
        let mut pts = Vec::new();
        for (name, q) in [("concentrated", &hot), ("uniform", &uniform)] {
            let (fs, moved, ok) = find_runs(&mut t, q, q.len(), s.runs)?;
            let rate = q.len() as f64 / fs / 1e6;
            csv_line(
                &mut csv,
                &[
                    format!("{placement:?}"),
                    name.into(),
                    q.len().to_string(),
                    format!("{fs:.4}"),
                    format!("{rate:.1}"),
                    format!("{moved:.3}"),
                    ok.to_string(),
                ],
            );
            eprintln!(
                "  {placement:?} {name}: {rate:.1} M keys/s, {moved:.2} GB swapped per batch"
            );
            pts.push((
                if name == "uniform" { 1.0 } else { 0.0 },
                ok.then_some(rate),
            ));
            all_ok &= ok;
        }
        series.push(Series {
            name: format!("{placement:?}"),
            points: pts,
        });
    }
    let fig = one_panel(
        format!(
            "Paged finds, {x} of {c} children resident: concentrated (x = 0) vs uniform (x = 1) queries, {}",
            s.backend
        ),
        "0 = queries on resident children, 1 = uniform",
        "M keys/s",
        XAxis::Linear,
        series,
    );
    save(s, "skew", &csv, Some(fig))?;
    Ok(all_ok)
}
