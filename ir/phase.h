// The part of the training step each node computes (Node::phase), completed for the nodes that
// passes add after the training step is built.
#pragma once

#include "ir/graph.h"

namespace ampc::ir {

// Every node whose phase is unknown takes the phase of its first reader whose phase is known
// (a Cast recomputed for the backward is backward), else that of the producer of its first
// input with one (a statistic of a gradient), else stays unknown. Nodes in topological order.
void fill_unknown_phases(Graph& g);

// A model in ONNX's training format has no field for phases. The one record it carries is
// the name prefix ampc's passes give their nodes, which an exported step keeps ("grad/",
// "amp/", "optimizer/", "stats/"; frontend/onnx/export_training.h): this is the only place
// those names are read as phases. Other nodes are forward.
void set_phases_from_exported_names(Graph& g);

// Sets every node's phase, and the graph's build_phase, to `phase`.
void set_phase(Graph& g, Phase phase);

}  // namespace ampc::ir
