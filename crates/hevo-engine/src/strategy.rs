//! (being written: strategies and replay)
