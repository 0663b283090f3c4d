//! (being written: sampling/estimation core)
