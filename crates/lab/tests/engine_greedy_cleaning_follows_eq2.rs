//! The engine's greedy cleaner under uniform random updates against Eq 2
//! (the seed's Figure 2): at each utilisation the live share of the segments
//! it cleans lands on Eq 2's u_c within 5 %, and the write cost on
//! `(user + read + written) / user` for that u_c. Prints the table (run with
//! `--nocapture`).

use proxima_lab::seed001_hylog::cost_model::cleaning_utilization_for;
use proxima_lab::seed001_hylog::engine_write_cost::{measure_write_cost, WriteCostSettings};

#[test]
fn greedy_cleaning_utilization_follows_eq_2() {
    println!("u     u_c engine  u_c Eq 2  write cost engine  2/(1-u_c) Eq 2");
    for utilization in [0.5, 0.7, 0.8, 0.9, 0.95] {
        let settings = WriteCostSettings { utilization, seed: 1, ..WriteCostSettings::default() };
        let measured = measure_write_cost(&settings).expect("the workload runs");
        let predicted = cleaning_utilization_for(utilization);
        let predicted_cost = 2.0 / (1.0 - predicted);
        println!(
            "{utilization:.2}  {:.4}      {predicted:.4}    {:.3}              {predicted_cost:.3}",
            measured.cleaning_utilization, measured.write_cost
        );
        assert!(measured.segments_cleaned > 0, "u = {utilization}: the cleaner ran");
        let error = (measured.cleaning_utilization - predicted).abs() / predicted;
        assert!(error <= 0.05, "u = {utilization}: u_c {} vs Eq 2 {predicted}", measured.cleaning_utilization);
    }
}
