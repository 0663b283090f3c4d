//! An epoch's children: three per survivor, each planned and edited by the agent in its
//! own copy of its parent and committed by hevo, or the ones another proposer wrote into
//! `pending/`.

use std::path::{Path, PathBuf};

use super::{call_agent, diagnosis_dir, io, Epochs, Made, PlanRecord};
use crate::archive::{Archive, Candidate, CandidateMeta};
use crate::harnesspro::plan::{self, EditWorkspace, Instruction, INSTRUCTIONS};
use crate::harnesspro::worktree::Repo;
use crate::proposer::AgentProposer;
use crate::run::SearchError;

impl Epochs {
    /// Three children per survivor, one per instruction, each planned and edited by the
    /// agent in its own copy of the parent and committed by hevo.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn edit_children(
        &self,
        epoch: u32,
        archive: &Archive,
        candidates: &[Candidate],
        pool: &[usize],
        survivors: &[&Candidate],
        agent: &AgentProposer,
        log: &mut dyn FnMut(&str),
    ) -> Result<Vec<PlanRecord>, SearchError> {
        let repo = Repo::open(&self.dir.join("repo")).map_err(SearchError::User)?;
        let train_ids: Vec<String> = self.train.iter().map(|t| t.id.clone()).collect();
        let mut plans = Vec::new();
        for parent in survivors {
            repo.ensure_branch(&parent.meta.name, &parent.code())
                .map_err(SearchError::User)?;
            for ins in INSTRUCTIONS {
                let child = format!("e{epoch:02}-c{:03}-{}", parent.seq, ins.id.to_lowercase());
                let ws =
                    EditWorkspace::at(&self.dir.join(format!("epoch-{epoch:03}/edit/{child}")));
                let result = self.edit_one(
                    epoch, archive, candidates, pool, parent, &child, ins, &ws, &repo, agent,
                    &train_ids,
                )?;
                let (summary, outcome) = match result {
                    Ok(summary) => (summary, "committed".to_string()),
                    Err((summary, why)) => (summary, format!("rejected: {why}")),
                };
                log(&format!(
                    "  {child} ({} of {}): {outcome}",
                    ins.id, parent.meta.name
                ));
                plans.push(PlanRecord {
                    child,
                    parent: parent.meta.name.clone(),
                    instruction: ins.id.into(),
                    summary,
                    outcome,
                });
            }
        }
        Ok(plans)
    }

    /// One child: the workspace, the agent's call, the staged copy of its files, the commit,
    /// the diff, the pending copy.
    /// The inner result is the plan's summary, or (summary, why the child is rejected).
    #[allow(clippy::too_many_arguments)]
    fn edit_one(
        &self,
        epoch: u32,
        archive: &Archive,
        candidates: &[Candidate],
        pool: &[usize],
        parent: &Candidate,
        child: &str,
        ins: Instruction,
        ws: &EditWorkspace,
        repo: &Repo,
        agent: &AgentProposer,
        train_ids: &[String],
    ) -> Result<Made, SearchError> {
        if ws.dir.exists() {
            hevo_runtime::remove::remove_tree(&ws.dir).map_err(io("cannot clear", &ws.dir))?;
        }
        std::fs::create_dir_all(&ws.plan_dir).map_err(io("cannot create", &ws.plan_dir))?;
        // The agent gets plain files: no repository of hevo's is in its reach.
        repo.checkout(&parent.meta.name, &ws.harness)
            .map_err(SearchError::User)?;
        self.write_context(epoch, candidates, pool, parent, ins, ws)
            .map_err(io("cannot write the context in", &ws.context))?;
        let prompt = plan::prompt(&parent.meta.name, child, ins);
        let transcript = agent
            .transcripts
            .join(format!("epoch-{epoch:03}/edit-{child}"));
        let writable = [ws.harness.clone(), ws.plan_dir.clone()];
        if let Err(why) = call_agent(agent, &ws.dir, transcript, &prompt, &writable)? {
            return Ok(Err((String::new(), why)));
        }
        let text = match plan::read_plan(ws) {
            Ok(t) => t,
            Err(why) => return Ok(Err((String::new(), why))),
        };
        let summary = plan::summary(&text);
        // What the agent left is copied into a folder hevo owns (regular files and folders
        // only, never a `.git`, bounded) and only that copy is committed and proposed: git
        // never runs in a folder the agent wrote.
        let staged = self.dir.join("staged").join(child);
        if staged.exists() {
            hevo_runtime::remove::remove_tree(&staged).map_err(io("cannot clear", &staged))?;
        }
        if let Err(why) = crate::archive::copy_candidate(&ws.harness, &staged) {
            return Ok(Err((summary, format!("harness/: {why}"))));
        }
        match repo.commit(&parent.meta.name, child, &staged, &text) {
            Ok(true) => {}
            Ok(false) => {
                return Ok(Err((
                    summary,
                    "the agent changed no file in harness/".into(),
                )))
            }
            Err(why) => return Ok(Err((summary, why))),
        }
        let diff = repo
            .diff(&parent.meta.name, child)
            .map_err(SearchError::User)?;
        if let Some(task) = plan::names_a_task(&diff, train_ids) {
            return Ok(Err((
                summary,
                format!("its edit names task `{task}`: plans must not target specific tasks"),
            )));
        }
        let diffs = self.dir.join("diffs");
        std::fs::create_dir_all(&diffs).map_err(io("cannot create", &diffs))?;
        let patch = diffs.join(format!("{child}.patch"));
        std::fs::write(&patch, &diff).map_err(io("cannot write", &patch))?;
        let dest = archive.pending_dir().join(child);
        crate::archive::copy_candidate(&staged, &dest)
            .map_err(|e| io("cannot copy", &staged)(e.into()))?;
        let meta = CandidateMeta {
            name: child.to_string(),
            parent: Some(parent.meta.name.clone()),
            iteration: epoch,
            hypothesis: summary.clone(),
            axis: format!(
                "{} {}",
                ins.id,
                ins.text.split(':').next().unwrap_or_default()
            ),
            components: vec![],
        };
        let toml = toml::to_string(&meta).unwrap_or_default();
        let path = dest.join("candidate.toml");
        std::fs::write(&path, toml).map_err(io("cannot write", &path))?;
        Ok(Ok(summary))
    }

    /// `context/`: the instruction, the parent's diagnoses and metrics, the other pool
    /// candidates' diffs and diagnoses (read-only for the agent).
    fn write_context(
        &self,
        epoch: u32,
        candidates: &[Candidate],
        pool: &[usize],
        parent: &Candidate,
        ins: Instruction,
        ws: &EditWorkspace,
    ) -> std::io::Result<()> {
        let ctx = &ws.context;
        std::fs::create_dir_all(ctx.join("parent"))?;
        std::fs::create_dir_all(ctx.join("others"))?;
        std::fs::write(
            ctx.join("instruction.md"),
            format!("# {}\n\n{}\n\n{}\n", ins.id, ins.text, plan::RULES),
        )?;
        let copy_diagnoses = |c: &Candidate, to: &Path, prefix: &str| -> std::io::Result<()> {
            for producer in ["builtin", "agent"] {
                let from = diagnosis_dir(c).join(format!("epoch-{epoch:03}.{producer}.json"));
                if from.is_file() {
                    std::fs::copy(&from, to.join(format!("{prefix}diagnosis.{producer}.json")))?;
                }
            }
            Ok(())
        };
        copy_diagnoses(parent, &ctx.join("parent"), "")?;
        let metrics = self.dir.join(format!(
            "epoch-{epoch:03}/diagnose/{}/metrics.json",
            parent.meta.name
        ));
        if metrics.is_file() {
            std::fs::copy(&metrics, ctx.join("parent/metrics.json"))?;
        }
        for &i in pool {
            let c = &candidates[i];
            if c.seq == parent.seq {
                continue;
            }
            let diff = c.dir.join("diff.patch");
            if diff.is_file() {
                std::fs::copy(&diff, ctx.join(format!("others/{}.diff", c.meta.name)))?;
            }
            copy_diagnoses(c, &ctx.join("others"), &format!("{}.", c.meta.name))?;
        }
        Ok(())
    }
}

/// The children another proposer wrote into `pending/`, as plan records.
pub(super) fn proposed_children(pending: &Path) -> Vec<PlanRecord> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(pending) else {
        return out;
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| hevo_runtime::untrusted::is_real_dir(p))
        .collect();
    dirs.sort();
    for d in dirs {
        let meta: Option<CandidateMeta> =
            hevo_runtime::untrusted::read_text(&d.join("candidate.toml"), 64 * 1024)
                .ok()
                .and_then(|t| toml::from_str(&t).ok());
        let name = d
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        out.push(PlanRecord {
            child: meta.as_ref().map_or(name, |m| m.name.clone()),
            parent: meta
                .as_ref()
                .and_then(|m| m.parent.clone())
                .unwrap_or_default(),
            instruction: "proposer".into(),
            summary: meta.map(|m| m.hypothesis).unwrap_or_default(),
            outcome: "committed".into(),
        });
    }
    out
}
