//! The stages, in DAG order: the one list the runner, the config checks and the
//! outputs are built from. Adding a stage is its module plus one line here.

use crate::runner::DynStage;

/// Every stage of the pipeline, each after the stages it reads.
pub fn registry() -> Vec<Box<dyn DynStage>> {
    vec![
        Box::new(crate::crawl::Crawl),
        Box::new(crate::clean::CleanGitbook),
        Box::new(crate::chunk::Chunk),
        Box::new(crate::embed::Embed),
        Box::new(crate::tune::Tune),
        Box::new(crate::bm25::Bm25),
        Box::new(crate::pack::Pack),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_registry_is_a_dag_in_topological_order() {
        crate::runner::dag::check_registry(&super::registry()).unwrap();
    }
}
