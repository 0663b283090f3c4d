//! (being written: Pareto, DPP, IRT and rank utilities)
