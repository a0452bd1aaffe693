// The extension module ampc._ampc: the trainer and the reports, bound with pybind11. The
// package ampc (python/ampc) is the documented interface; this module is its engine.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>

#include "base/error.h"
#include "ops/schemas/amp_schemas.h"
#include "python/src/reports.h"
#include "python/src/tensor_view.h"
#include "python/src/trainer.h"
#include "runtime/plan/plan_file.h"

namespace py = pybind11;
using ampc::python::BorrowedArray;
using ampc::python::Trainer;
using ampc::python::TrainOptions;

namespace {

// The caller's arrays, borrowed: the buffer views keep each exporter alive (and its memory
// where it is) for as long as `views` lives.
std::map<std::string, BorrowedArray> borrow_all(const py::dict& arrays,
                                                std::vector<py::buffer_info>& views) {
  std::map<std::string, BorrowedArray> out;
  views.reserve(arrays.size());
  for (const auto& [key, value] : arrays) {
    const auto name = key.cast<std::string>();
    if (!py::isinstance<py::buffer>(value))
      throw ampc::Error("input '" + name + "' is a " +
                        std::string(py::str(value.get_type().attr("__name__"))) + ", not an array");
    views.push_back(value.cast<py::buffer>().request());
    out[name] = ampc::python::borrow(views.back(), name);
  }
  return out;
}

py::object optional_float(const std::optional<double>& v) {
  return v ? py::object(py::float_(*v)) : py::object(py::none());
}

py::dict numpy_dict(const std::map<std::string, ampc::rt::Tensor>& tensors) {
  py::dict out;
  for (const auto& [name, t] : tensors) out[py::str(name)] = ampc::python::to_numpy(t);
  return out;
}

}  // namespace

PYBIND11_MODULE(_ampc, m) {
  m.doc() = "The engine of the ampc package: compiled training plans run by ampc's runtime.";
  py::register_exception<ampc::Error>(m, "Error", PyExc_RuntimeError);
  // A model in training format (a checkpoint) may hold the loss scaler's ops.
  ampc::ops::register_amp_schemas();

  py::class_<TrainOptions>(m, "TrainOptions")
      .def(py::init<>())
      .def_readwrite("precision", &TrainOptions::precision)
      .def_readwrite("optimizer", &TrainOptions::optimizer)
      .def_readwrite("lr", &TrainOptions::lr)
      .def_readwrite("momentum", &TrainOptions::momentum)
      .def_readwrite("weight_decay", &TrainOptions::weight_decay)
      .def_readwrite("eps", &TrainOptions::eps)
      .def_readwrite("betas", &TrainOptions::betas)
      .def_readwrite("loss_scale", &TrainOptions::loss_scale)
      .def_readwrite("init_scale", &TrainOptions::init_scale)
      .def_readwrite("growth_factor", &TrainOptions::growth_factor)
      .def_readwrite("backoff_factor", &TrainOptions::backoff_factor)
      .def_readwrite("growth_interval", &TrainOptions::growth_interval)
      .def_readwrite("min_scale", &TrainOptions::min_scale)
      .def_readwrite("max_scale", &TrainOptions::max_scale)
      .def_readwrite("skip_nonfinite", &TrainOptions::skip_nonfinite)
      .def_readwrite("nesterov", &TrainOptions::nesterov)
      .def_readwrite("lr_schedule", &TrainOptions::lr_schedule)
      .def_readwrite("warmup_steps", &TrainOptions::warmup_steps)
      .def_readwrite("warmup_start_factor", &TrainOptions::warmup_start_factor)
      .def_readwrite("total_steps", &TrainOptions::total_steps)
      .def_readwrite("step_size", &TrainOptions::step_size)
      .def_readwrite("gamma", &TrainOptions::gamma)
      .def_readwrite("min_lr_factor", &TrainOptions::min_lr_factor)
      .def_readwrite("no_decay", &TrainOptions::no_decay)
      .def_readwrite("lr_mult", &TrainOptions::lr_mult)
      .def_readwrite("clip_grad_norm", &TrainOptions::clip_grad_norm)
      .def_readwrite("accum_steps", &TrainOptions::accum_steps)
      .def_readwrite("freeze", &TrainOptions::freeze)
      .def_readwrite("losses", &TrainOptions::losses)
      .def_readwrite("input_shapes", &TrainOptions::input_shapes)
      .def_readwrite("log_grad_norm", &TrainOptions::log_grad_norm)
      .def_readwrite("allow", &TrainOptions::allow)
      .def_readwrite("deny", &TrainOptions::deny)
      .def_readwrite("follow", &TrainOptions::follow)
      .def_readwrite("keep_fp32", &TrainOptions::keep_fp32)
      .def_readwrite("policy", &TrainOptions::policy)
      .def_readwrite("recast_weights", &TrainOptions::recast_weights)
      .def_readwrite("recompute_elementwise", &TrainOptions::recompute_elementwise)
      .def_readwrite("batchnorm_running_var", &TrainOptions::batchnorm_running_var)
      .def_readwrite("fusion", &TrainOptions::fusion)
      .def_readwrite("target", &TrainOptions::target)
      .def_readwrite("device", &TrainOptions::device)
      .def_readwrite("given", &TrainOptions::given);

  py::class_<Trainer>(m, "Trainer")
      .def(py::init([](const std::string& path, const TrainOptions& options, uint64_t seed) {
             std::vector<std::string> warnings;
             std::unique_ptr<Trainer> t;
             {
               py::gil_scoped_release release;  // compiling takes a while
               t = std::make_unique<Trainer>(ampc::python::training_plan(path, options, warnings),
                                             path, seed, options.device);
             }
             // The compile's warnings as Python's (UserWarning), where `warnings` filters them.
             for (const std::string& line : warnings) {
               if (PyErr_WarnEx(PyExc_UserWarning, line.c_str(), 1) < 0)
                 throw py::error_already_set();
             }
             return t;
           }),
           py::arg("path"), py::arg("options"), py::arg("seed") = 0)
      .def(
          "step",
          [](Trainer& t, const py::dict& arrays) {
            std::vector<py::buffer_info> views;
            const auto feeds = borrow_all(arrays, views);
            ampc::python::StepResult r;
            {
              py::gil_scoped_release release;
              r = t.step(feeds);
            }
            py::dict out;
            out["loss"] = r.loss;
            out["scale"] = optional_float(r.scale);
            out["skipped"] = r.skipped;
            out["grad_norm"] = optional_float(r.grad_norm);
            out["lr"] = r.lr;
            out["step"] = r.step;
            out["losses"] = r.losses;
            return out;
          },
          py::arg("arrays"))
      .def("step_inputs",
           [](const Trainer& t) {
             py::dict out;
             for (const auto& [name, type] : t.step_inputs())
               out[py::str(name)] = py::make_tuple(std::string(ampc::dtype_name(type.first)),
                                                   py::tuple(py::cast(type.second)));
             return out;
           })
      .def_property_readonly("accum_steps", &Trainer::accum_steps)
      .def_property_readonly("batch", &Trainer::batch)
      .def_property_readonly("losses", &Trainer::losses)
      .def_property_readonly("steps_done", &Trainer::steps_done)
      .def_property_readonly("model_state_names", &Trainer::model_state_names)
      .def("last_input_addresses", &Trainer::last_input_addresses)
      .def("state", [](const Trainer& t) { return numpy_dict(t.state()); })
      .def(
          "update_state",
          [](Trainer& t, const py::dict& arrays) {
            std::vector<py::buffer_info> views;
            std::map<std::string, ampc::rt::Tensor> values;
            for (const auto& [name, a] : borrow_all(arrays, views))
              values.emplace(name, ampc::python::to_tensor(a));
            py::gil_scoped_release release;
            t.update_state(values);
          },
          py::arg("arrays"))
      .def("save", &Trainer::save, py::arg("path"), py::arg("data_position") = py::none(),
           py::call_guard<py::gil_scoped_release>())
      .def("load_checkpoint", &Trainer::load_checkpoint, py::arg("path"),
           py::call_guard<py::gil_scoped_release>())
      .def("save_plan", &Trainer::save_plan, py::arg("path"),
           py::call_guard<py::gil_scoped_release>())
      .def(
          "evaluate",
          [](const Trainer& t, const py::dict& arrays) {
            std::vector<py::buffer_info> views;
            const auto data = ampc::python::dataset_of(borrow_all(arrays, views));
            ampc::cli::EvalResult r;
            {
              py::gil_scoped_release release;
              r = t.evaluate(data);
            }
            py::dict out;
            out["samples"] = r.samples;
            out["loss"] = r.loss;
            out["accuracy"] = optional_float(r.accuracy);
            out["unused_samples"] = r.unused_samples;
            return out;
          },
          py::arg("arrays"));

  m.def("inspect_json", &ampc::python::inspect_json, py::arg("path"), py::arg("precision"),
        py::arg("precision_report"), py::arg("input_shapes"),
        py::call_guard<py::gil_scoped_release>());
  m.def("looks_like_plan", &ampc::plan::looks_like_plan, py::arg("path"));
  m.def("report_json", &ampc::python::report_json, py::arg("stats_path"),
        py::call_guard<py::gil_scoped_release>());
}
