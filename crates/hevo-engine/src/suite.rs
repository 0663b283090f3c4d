//! (being written: foundation)
