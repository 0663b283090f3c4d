//! Counted nouns for the CLI's sentences: "1 candidate", "3 candidates".

/// `n` followed by `noun`, with an `s` unless `n` is 1 (every noun the CLI counts takes `s`).
pub fn counted(n: u64, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::counted;

    #[test]
    fn one_is_singular_and_every_other_count_is_plural() {
        assert_eq!(counted(1, "trial"), "1 trial");
        assert_eq!(counted(0, "trial"), "0 trials");
        assert_eq!(counted(2, "candidate"), "2 candidates");
    }
}
