//! MQSim beside nandlab: `nandlab bench perf --mqsim PATH`.
//!
//! A speed ratio between two simulators means something only when both ran
//! the same work on the same machine in the same hour: this machine's speed
//! moves 2x from day to day, and ratios against figures measured on another
//! day were overstated about 2x in this project's past. So `bench perf`
//! can run a locally built MQSim (a checkout of `CMU-SAFARI/MQSim`, built
//! outside this repository with `make`; nothing of it is part of nandlab)
//! on each scenario, alternating with nandlab's runs, and print both.
//!
//! What MQSim is given is derived from the same typed device nandlab runs
//! ([`ssdconfig_xml`]: geometry, flash latencies, channel rate and width,
//! over-provisioning, the write cache size; the rest as MQSim ships it:
//! its priority out-of-order scheduler, 2 MiB cached mapping table, RGA
//! victim choice, erase suspension) and the scenario's flows
//! ([`workload_xml`]: one `IO_Flow_Parameter_Set_Synthetic` per nandlab
//! `--flow`, with the same operation, request size, alignment, queue
//! depth, working set and stop condition). The files are written in
//! MQSim's documented input format (its `ssdconfig.xml` and
//! `workload.xml` element names); MQSim's results file
//! (`<workload>_scenario_1.xml`) is read back for the requests it served
//! and its simulated IOPS and response times.
//!
//! **Measuring.** Each MQSim process is measured by `wait4` (user + system
//! CPU time, peak RSS), as nandlab's are by their own reports. MQSim's CPU
//! time includes setting up its device model (allocating every page's
//! state: about 2 GB for `mqsim-default`) and, when asked, its
//! preconditioning; nandlab reports its setup and preconditioning apart.
//! To compare the simulation itself, each MQSim run is paired with a
//! setup-only run of the same files stopped after 1 µs of simulated time,
//! and the simulation's CPU time is the difference. Both ratios are
//! printed: simulation against simulation, and whole process against
//! whole process.

use crate::{median, run_measured};
use nandlab::config::{Config, ConfigFile};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One MQSim I/O flow (`IO_Flow_Parameter_Set_Synthetic`): a host queue
/// issuing requests of one kind at a fixed queue depth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Flow {
    /// Share of reads, in percent (0: writes only; 100: reads only).
    pub read_percent: u32,
    /// Requests kept outstanding (`Average_No_of_Reqs_in_Queue` with
    /// `Synthetic_Generator_Type` `QUEUE_DEPTH`).
    pub queue_depth: u32,
    /// MQSim's priority class (`URGENT`, `HIGH`, `MEDIUM`, `LOW`); only its
    /// priority scheduler uses it (nandlab has no priority classes).
    pub priority: &'static str,
    /// MQSim's seed for the flow's address and size draws.
    pub seed: u32,
}

/// An MQSim scenario: the flows of one `IO_Scenario` and what the device
/// does before and around them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scenario {
    pub flows: &'static [Flow],
    /// Request size in bytes (`Request_Size_Distribution` `FIXED`).
    pub request_bytes: u64,
    /// Address alignment in bytes (`Address_Alignment_Unit`).
    pub alignment_bytes: u64,
    /// Share of the logical space the flows address, in percent.
    pub working_set_percent: u32,
    /// Preconditioning to this occupancy before the flows start, in
    /// percent (`Enabled_Preconditioning` and
    /// `Initial_Occupancy_Percentage`); `None`: none, as MQSim ships.
    pub precondition_percent: Option<u32>,
    /// How the flows stop: after this much simulated time, or after this
    /// many requests per flow.
    pub stop: Stop,
}

/// When an MQSim flow stops generating requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stop {
    /// `Stop_Time` (ns of simulated time).
    SimulatedNs(u64),
    /// `Total_Requests_To_Generate` (per flow; `Stop_Time` 0).
    Requests(u64),
}

/// What one MQSim run printed and cost.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    /// Requests served, all flows.
    pub requests: f64,
    /// Per flow: name, IOPS, mean device response time (µs).
    pub flows: Vec<(String, f64, f64)>,
    /// Whole-process CPU time (user + system), seconds.
    pub cpu_s: f64,
    /// Peak RSS, bytes.
    pub rss_bytes: u64,
}

impl Figures {
    /// Simulated IOPS, all flows.
    pub fn iops(&self) -> f64 {
        self.flows.iter().map(|f| f.1).sum()
    }

    /// Mean device response time of all requests, µs: the flows' means
    /// weighted by their IOPS (every flow runs for the same simulated
    /// time, so IOPS weigh as request counts do).
    pub fn mean_response_us(&self) -> f64 {
        let weight = self.iops();
        if weight > 0.0 {
            self.flows.iter().map(|f| f.1 * f.2).sum::<f64>() / weight
        } else {
            0.0
        }
    }
}

/// A located MQSim executable.
#[derive(Clone, Debug)]
pub struct Mqsim {
    exe: PathBuf,
}

impl Mqsim {
    /// Check that `path` is an executable file; `Err` names what is wrong
    /// (bad input: the bench exits 2 before running anything).
    pub fn locate(path: &Path) -> Result<Mqsim, String> {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path).map_err(|e| format!("--mqsim {}: {e}", path.display()))?;
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            return Err(format!(
                "--mqsim {}: not an executable file (give the MQSim binary built by `make` in a CMU-SAFARI/MQSim checkout)",
                path.display()
            ));
        }
        let exe = std::fs::canonicalize(path).map_err(|e| format!("--mqsim {}: {e}", path.display()))?;
        Ok(Mqsim { exe })
    }

    /// Run `scenario` on `device` in `dir` (files named after `tag`), and
    /// return what MQSim served and what it cost. `setup_only` stops the
    /// flows after 1 µs of simulated time (see the module docs).
    pub fn run(
        &self,
        dir: &Path,
        tag: &str,
        device: &ConfigFile,
        scenario: &Scenario,
        setup_only: bool,
    ) -> Result<Figures, String> {
        let mut scenario = *scenario;
        if setup_only {
            scenario.stop = Stop::SimulatedNs(1_000);
        }
        let ssd = dir.join(format!("{tag}-ssdconfig.xml"));
        let workload = dir.join(format!("{tag}-workload.xml"));
        let results = dir.join(format!("{tag}-workload_scenario_1.xml"));
        let _ = std::fs::remove_file(&results);
        let write = |p: &Path, text: String| std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()));
        write(&ssd, ssdconfig_xml(device, &scenario)?)?;
        write(&workload, workload_xml(&scenario, device))?;
        // MQSim waits for a key press at the end: stdin from /dev/null.
        let mut cmd = Command::new(&self.exe);
        cmd.current_dir(dir)
            .arg("-i")
            .arg(&ssd)
            .arg("-w")
            .arg(&workload)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let m = run_measured(&mut cmd).map_err(|e| format!("{}: {e}", self.exe.display()))?;
        if !m.success {
            return Err(format!("MQSim {}", m.status));
        }
        let text = std::fs::read_to_string(&results)
            .map_err(|e| format!("MQSim left no results file {}: {e}", results.display()))?;
        let flows = parse_results(&text).map_err(|e| format!("{}: {e}", results.display()))?;
        Ok(Figures {
            requests: flows.iter().map(|f| f.requests).sum(),
            flows: flows.into_iter().map(|f| (f.name, f.iops, f.response_us)).collect(),
            cpu_s: m.cpu_s,
            rss_bytes: m.rss_bytes,
        })
    }
}

/// One flow of MQSim's results file.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowResult {
    pub name: String,
    pub requests: f64,
    pub iops: f64,
    /// Mean device response time, µs.
    pub response_us: f64,
}

/// Parse MQSim's results file: one `Host.IO_Flow` element per flow with
/// `Name`, `Request_Count`, `IOPS` and `Device_Response_Time` (µs).
pub fn parse_results(text: &str) -> Result<Vec<FlowResult>, String> {
    let doc = roxmltree::Document::parse(text).map_err(|e| format!("not MQSim's results XML: {e}"))?;
    let mut flows = Vec::new();
    for flow in doc.descendants().filter(|n| n.has_tag_name("Host.IO_Flow")) {
        let field = |name: &str| -> Result<&str, String> {
            flow.children()
                .find(|c| c.has_tag_name(name))
                .and_then(|c| c.text())
                .map(str::trim)
                .ok_or_else(|| format!("a Host.IO_Flow has no {name}"))
        };
        let number = |name: &str| -> Result<f64, String> {
            let v = field(name)?;
            // MQSim writes `inf` for rates of a run stopped before 1 ms of
            // simulated time (a setup-only run): a number all the same.
            v.parse::<f64>().map_err(|_| format!("{name} `{v}` is not a number"))
        };
        flows.push(FlowResult {
            name: field("Name")?.to_string(),
            requests: number("Request_Count")?,
            iops: number("IOPS")?,
            response_us: number("Device_Response_Time")?,
        });
    }
    if flows.is_empty() {
        return Err("no Host.IO_Flow in MQSim's results".into());
    }
    Ok(flows)
}

/// MQSim's device file for `device`: geometry, flash latencies, channel,
/// over-provisioning and write cache from the typed configuration; GC
/// threshold 5 % free, RGA victims, the priority out-of-order scheduler,
/// a 2 MiB cached mapping table, erase suspension and the DRAM model as
/// MQSim ships them. `Err` if the device has no `[timing]` table.
pub fn ssdconfig_xml(device: &ConfigFile, scenario: &Scenario) -> Result<String, String> {
    let text = toml::to_string(device).map_err(|e| format!("device: {e}"))?;
    let config = Config::parse(&text, "bench device").map_err(|e| e.to_string())?;
    let timing = config.timing.as_ref().ok_or("an MQSim run needs a device with a [timing] table")?;
    let g = config.geometry.config();
    let level = |levels: &[u64], i: usize| levels[i.min(levels.len().saturating_sub(1))];
    let (reads, programs) = (&timing.read_ns_by_level, &timing.program_ns_by_level);
    let cache_bytes = timing.config.write_cache_bytes.map(|s| s.resolve(u64::MAX)).unwrap_or(256 << 20);
    let over_provisioning = device.device.spare_percent.unwrap_or(7.0) / 100.0;
    let technology = format!("{:?}", g.cell_type).to_uppercase();
    let (preconditioning, _) = occupancy(scenario);
    // The link: MQSim's lane count and per-lane GB/s, from nandlab's link
    // bandwidth (bytes per second, all lanes).
    let lanes = config.host.config.pcie_lanes.unwrap_or(4).max(1);
    let lane_gbps = config.host.link_bytes_per_s as f64 / f64::from(lanes) / 1e9;
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"us-ascii\"?>\n<Execution_Parameter_Set>\n");
    let leaf = |x: &mut String, depth: usize, name: &str, value: &dyn std::fmt::Display| {
        let _ = writeln!(x, "{}<{name}>{value}</{name}>", "\t".repeat(depth));
    };
    x.push_str("\t<Host_Parameter_Set>\n");
    leaf(&mut x, 2, "PCIe_Lane_Bandwidth", &format!("{lane_gbps:.5}"));
    leaf(&mut x, 2, "PCIe_Lane_Count", &lanes);
    leaf(&mut x, 2, "SATA_Processing_Delay", &400_000);
    leaf(&mut x, 2, "Enable_ResponseTime_Logging", &"false");
    leaf(&mut x, 2, "ResponseTime_Logging_Period_Length", &1_000_000);
    x.push_str("\t</Host_Parameter_Set>\n\t<Device_Parameter_Set>\n");
    for (name, value) in [
        ("Seed", "321".to_string()),
        ("Enabled_Preconditioning", preconditioning.to_string()),
        ("Memory_Type", "FLASH".into()),
        ("HostInterface_Type", "NVME".into()),
        ("IO_Queue_Depth", "65535".into()),
        ("Queue_Fetch_Size", "512".into()),
        ("Caching_Mechanism", "ADVANCED".into()),
        ("Data_Cache_Sharing_Mode", "SHARED".into()),
        ("Data_Cache_Capacity", cache_bytes.to_string()),
        ("Data_Cache_DRAM_Row_Size", "8192".into()),
        ("Data_Cache_DRAM_Data_Rate", "100".into()),
        ("Data_Cache_DRAM_Data_Busrt_Size", "1".into()),
        ("Data_Cache_DRAM_tRCD", "13".into()),
        ("Data_Cache_DRAM_tCL", "13".into()),
        ("Data_Cache_DRAM_tRP", "13".into()),
        ("Address_Mapping", "PAGE_LEVEL".into()),
        ("Ideal_Mapping_Table", "false".into()),
        ("CMT_Capacity", "2097152".into()),
        ("CMT_Sharing_Mode", "SHARED".into()),
        ("Plane_Allocation_Scheme", "CWDP".into()),
        ("Transaction_Scheduling_Policy", "PRIORITY_OUT_OF_ORDER".into()),
        ("Overprovisioning_Ratio", format!("{over_provisioning:.5}")),
        ("GC_Exec_Threshold", "0.05000".into()),
        ("GC_Block_Selection_Policy", "RGA".into()),
        ("Use_Copyback_for_GC", "false".into()),
        ("Preemptible_GC_Enabled", "false".into()),
        ("GC_Hard_Threshold", "0.005000".into()),
        ("Dynamic_Wearleveling_Enabled", "true".into()),
        ("Static_Wearleveling_Enabled", "true".into()),
        ("Static_Wearleveling_Threshold", "100".into()),
        ("Preferred_suspend_erase_time_for_read", "700000".into()),
        ("Preferred_suspend_erase_time_for_write", "700000".into()),
        ("Preferred_suspend_write_time_for_read", "100000".into()),
        ("Flash_Channel_Count", g.channels.to_string()),
        ("Flash_Channel_Width", timing.config.channel_width_bytes.to_string()),
        ("Channel_Transfer_Rate", format!("{:.0}", timing.config.channel_rate_mtps)),
        ("Chip_No_Per_Channel", g.chips_per_channel.to_string()),
        ("Flash_Comm_Protocol", "NVDDR2".into()),
    ] {
        leaf(&mut x, 2, name, &value);
    }
    x.push_str("\t\t<Flash_Parameter_Set>\n");
    for (name, value) in [
        ("Flash_Technology", technology),
        ("CMD_Suspension_Support", if timing.config.erase_suspend { "ERASE" } else { "NONE" }.to_string()),
        ("Page_Read_Latency_LSB", level(reads, 0).to_string()),
        ("Page_Read_Latency_CSB", level(reads, 1).to_string()),
        ("Page_Read_Latency_MSB", level(reads, 2).to_string()),
        ("Page_Program_Latency_LSB", level(programs, 0).to_string()),
        ("Page_Program_Latency_CSB", level(programs, 1).to_string()),
        ("Page_Program_Latency_MSB", level(programs, 2).to_string()),
        ("Block_Erase_Latency", timing.erase_ns.to_string()),
        ("Block_PE_Cycles_Limit", "10000".into()),
        ("Suspend_Erase_Time", format!("{:.0}", timing.config.erase_suspend_latency_us * 1000.0)),
        ("Suspend_Program_Time", format!("{:.0}", timing.config.program_suspend_latency_us * 1000.0)),
        ("Die_No_Per_Chip", g.dies_per_chip.to_string()),
        ("Plane_No_Per_Die", g.planes_per_die.to_string()),
        ("Block_No_Per_Plane", g.blocks_per_plane.to_string()),
        ("Page_No_Per_Block", g.pages_per_block.to_string()),
        ("Page_Capacity", g.page_size_bytes.to_string()),
        ("Page_Metadat_Capacity", g.oob_size_bytes.to_string()),
    ] {
        leaf(&mut x, 3, name, &value);
    }
    x.push_str("\t\t</Flash_Parameter_Set>\n\t</Device_Parameter_Set>\n</Execution_Parameter_Set>\n");
    Ok(x)
}

/// Whether MQSim preconditions, and to what occupancy (percent).
fn occupancy(scenario: &Scenario) -> (bool, u32) {
    match scenario.precondition_percent {
        Some(p) => (true, p),
        None => (false, 0),
    }
}

/// MQSim's workload file for `scenario` on `device`: one scenario with
/// one synthetic flow per [`Flow`], each over every channel, chip, die and
/// plane of the device (MQSim names them by index).
pub fn workload_xml(scenario: &Scenario, device: &ConfigFile) -> String {
    let g = &device.geometry;
    let (channels, chips, dies, planes) = (g.channels, g.chips_per_channel, g.dies_per_chip, g.planes_per_die);
    let ids = |n: u32| (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    let sectors = |bytes: u64| bytes / 512;
    let (_, occupancy_percent) = occupancy(scenario);
    let (stop_ns, requests) = match scenario.stop {
        Stop::SimulatedNs(ns) => (ns, 0),
        Stop::Requests(n) => (0, n),
    };
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"us-ascii\"?>\n<MQSim_IO_Scenarios>\n\t<IO_Scenario>\n");
    for flow in scenario.flows {
        x.push_str("\t\t<IO_Flow_Parameter_Set_Synthetic>\n");
        for (name, value) in [
            ("Priority_Class", flow.priority.to_string()),
            ("Device_Level_Data_Caching_Mode", "WRITE_CACHE".into()),
            ("Channel_IDs", ids(channels)),
            ("Chip_IDs", ids(chips)),
            ("Die_IDs", ids(dies)),
            ("Plane_IDs", ids(planes)),
            ("Initial_Occupancy_Percentage", occupancy_percent.to_string()),
            ("Working_Set_Percentage", scenario.working_set_percent.to_string()),
            ("Synthetic_Generator_Type", "QUEUE_DEPTH".into()),
            ("Read_Percentage", flow.read_percent.to_string()),
            ("Address_Distribution", "RANDOM_UNIFORM".into()),
            ("Percentage_of_Hot_Region", "0".into()),
            ("Generated_Aligned_Addresses", "true".into()),
            ("Address_Alignment_Unit", sectors(scenario.alignment_bytes).to_string()),
            ("Request_Size_Distribution", "FIXED".into()),
            ("Average_Request_Size", sectors(scenario.request_bytes).to_string()),
            ("Variance_Request_Size", "0".into()),
            ("Seed", flow.seed.to_string()),
            ("Average_No_of_Reqs_in_Queue", flow.queue_depth.to_string()),
            ("Intensity", "32768".into()),
            ("Stop_Time", stop_ns.to_string()),
            ("Total_Requests_To_Generate", requests.to_string()),
        ] {
            let _ = writeln!(x, "\t\t\t<{name}>{value}</{name}>");
        }
        x.push_str("\t\t</IO_Flow_Parameter_Set_Synthetic>\n");
    }
    x.push_str("\t</IO_Scenario>\n</MQSim_IO_Scenarios>\n");
    x
}

/// The medians of MQSim's runs of one scenario, full and setup-only.
#[derive(Clone, Debug, Default)]
pub struct Medians {
    pub requests: f64,
    pub cpu_s: f64,
    pub setup_cpu_s: f64,
    pub rss_bytes: f64,
}

impl Medians {
    pub fn of(full: &[Figures], setup: &[Figures]) -> Medians {
        Medians {
            requests: median(full.iter().map(|f| f.requests).collect()),
            cpu_s: median(full.iter().map(|f| f.cpu_s).collect()),
            setup_cpu_s: median(setup.iter().map(|f| f.cpu_s).collect()),
            rss_bytes: median(full.iter().map(|f| f.rss_bytes as f64).collect()),
        }
    }

    /// Requests per CPU-second of the simulation alone (whole process
    /// minus the setup-only run's CPU time).
    pub fn simulation_per_cpu_s(&self) -> f64 {
        self.requests / (self.cpu_s - self.setup_cpu_s).max(1e-9)
    }

    /// Requests per CPU-second of the whole process.
    pub fn whole_per_cpu_s(&self) -> f64 {
        self.requests / self.cpu_s.max(1e-9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mqsim_default() -> ConfigFile {
        let (_, text) = nandlab::config::PRESETS.iter().find(|(n, _)| *n == "mqsim-default").unwrap();
        toml::from_str(text).unwrap()
    }

    const S1: Scenario = Scenario {
        flows: &[Flow { read_percent: 0, queue_depth: 16, priority: "HIGH", seed: 798 }],
        request_bytes: 4096,
        alignment_bytes: 8192,
        working_set_percent: 50,
        precondition_percent: None,
        stop: Stop::SimulatedNs(10_000_000_000),
    };

    fn fields(xml: &str) -> std::collections::BTreeMap<String, String> {
        let doc = roxmltree::Document::parse(xml).unwrap();
        doc.descendants()
            .filter(|n| n.is_element() && n.children().all(|c| c.is_text()))
            .map(|n| (n.tag_name().name().to_string(), n.text().unwrap_or("").to_string()))
            .collect()
    }

    #[test]
    fn the_mqsim_device_of_mqsim_default_is_mqsims_shipped_device() {
        // The values of MQSim's shipped ssdconfig.xml for the fields the
        // preset models: a change to either side fails here.
        let f = fields(&ssdconfig_xml(&mqsim_default(), &S1).unwrap());
        for (k, v) in [
            ("PCIe_Lane_Bandwidth", "1.00000"),
            ("PCIe_Lane_Count", "4"),
            ("Enabled_Preconditioning", "false"),
            ("Data_Cache_Capacity", "268435456"),
            ("Overprovisioning_Ratio", "0.07000"),
            ("Flash_Channel_Count", "8"),
            ("Flash_Channel_Width", "1"),
            ("Channel_Transfer_Rate", "333"),
            ("Chip_No_Per_Channel", "4"),
            ("Flash_Technology", "MLC"),
            ("CMD_Suspension_Support", "ERASE"),
            ("Page_Read_Latency_LSB", "75000"),
            ("Page_Read_Latency_MSB", "75000"),
            ("Page_Program_Latency_LSB", "750000"),
            ("Page_Program_Latency_MSB", "750000"),
            ("Block_Erase_Latency", "3800000"),
            ("Suspend_Erase_Time", "700000"),
            ("Suspend_Program_Time", "100000"),
            ("Die_No_Per_Chip", "2"),
            ("Plane_No_Per_Die", "2"),
            ("Block_No_Per_Plane", "2048"),
            ("Page_No_Per_Block", "256"),
            ("Page_Capacity", "8192"),
            ("Page_Metadat_Capacity", "448"),
        ] {
            assert_eq!(f.get(k).map(String::as_str), Some(v), "{k}");
        }
        let pre = Scenario { precondition_percent: Some(75), ..S1 };
        assert_eq!(fields(&ssdconfig_xml(&mqsim_default(), &pre).unwrap())["Enabled_Preconditioning"], "true");
        let w = fields(&workload_xml(&pre, &mqsim_default()));
        assert_eq!(w["Initial_Occupancy_Percentage"], "75");
    }

    #[test]
    fn a_device_without_timing_is_refused() {
        let mut d = mqsim_default();
        d.timing = None;
        assert!(ssdconfig_xml(&d, &S1).unwrap_err().contains("[timing]"));
    }

    #[test]
    fn results_are_read_per_flow_and_bad_files_are_named() {
        let ok = "<?xml version=\"1.0\"?><MQSim_Results><Host>\
            <Host.IO_Flow><Name>F0</Name><Request_Count>10</Request_Count><IOPS>5.5</IOPS><Device_Response_Time>484</Device_Response_Time></Host.IO_Flow>\
            <Host.IO_Flow><Name>F1</Name><Request_Count>2</Request_Count><IOPS>1</IOPS><Device_Response_Time>32</Device_Response_Time></Host.IO_Flow>\
            </Host></MQSim_Results>";
        let flows = parse_results(ok).unwrap();
        assert_eq!(flows.len(), 2);
        assert_eq!(flows[0], FlowResult { name: "F0".into(), requests: 10.0, iops: 5.5, response_us: 484.0 });
        assert!(parse_results("<MQSim_Results/>").unwrap_err().contains("no Host.IO_Flow"));
        assert!(parse_results("not xml").unwrap_err().contains("not MQSim's results XML"));
        let missing = ok.replace("<IOPS>5.5</IOPS>", "");
        assert!(parse_results(&missing).unwrap_err().contains("no IOPS"));
        let nan = ok.replace("<IOPS>5.5</IOPS>", "<IOPS>fast</IOPS>");
        assert!(parse_results(&nan).unwrap_err().contains("IOPS `fast` is not a number"));
    }

    #[test]
    fn all_flows_iops_and_mean_response_weigh_each_flow_by_its_iops() {
        let f = Figures {
            flows: vec![("F0".into(), 30_000.0, 400.0), ("F1".into(), 10_000.0, 800.0)],
            ..Figures::default()
        };
        assert_eq!(f.iops(), 40_000.0);
        assert_eq!(f.mean_response_us(), 500.0);
        assert_eq!(Figures::default().mean_response_us(), 0.0);
    }

    #[test]
    fn locate_refuses_what_is_not_an_executable() {
        assert!(Mqsim::locate(Path::new("/nonexistent/MQSim")).unwrap_err().contains("--mqsim /nonexistent/MQSim"));
        let dir = std::env::temp_dir().join(format!("nandlab-mqsim-locate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("MQSim");
        std::fs::write(&file, "").unwrap();
        assert!(Mqsim::locate(&file).unwrap_err().contains("not an executable"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The run plumbing, with a stand-in for MQSim (a shell script that
    /// checks it was given both files and writes a results file beside
    /// the workload file, as MQSim does): what it served is read back,
    /// its CPU time measured, and a failing MQSim is an error naming how
    /// it ended.
    #[test]
    fn a_run_writes_both_files_and_reads_the_results_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("nandlab-mqsim-run-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("MQSim");
        std::fs::write(
            &script,
            "#!/bin/sh\n[ \"$1\" = -i ] && [ \"$3\" = -w ] || exit 3\n\
             grep -q '<Block_No_Per_Plane>2048</Block_No_Per_Plane>' \"$2\" || exit 4\n\
             n=$(grep -c '<IO_Flow_Parameter_Set_Synthetic>' \"$4\")\n\
             stop=$(sed -n 's:.*<Stop_Time>\\(.*\\)</Stop_Time>.*:\\1:p' \"$4\" | head -1)\n\
             out=\"${4%.xml}_scenario_1.xml\"\n\
             { echo '<MQSim_Results><Host>'; i=0; while [ $i -lt $n ]; do\n\
               echo \"<Host.IO_Flow><Name>F$i</Name><Request_Count>$stop</Request_Count><IOPS>inf</IOPS><Device_Response_Time>7</Device_Response_Time></Host.IO_Flow>\"; i=$((i+1)); done;\n\
               echo '</Host></MQSim_Results>'; } > \"$out\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let m = Mqsim::locate(&script).unwrap();
        let two = Scenario {
            flows: &[
                Flow { read_percent: 0, queue_depth: 16, priority: "HIGH", seed: 1 },
                Flow { read_percent: 0, queue_depth: 2, priority: "HIGH", seed: 2 },
            ],
            ..S1
        };
        let full = m.run(&dir, "t", &mqsim_default(), &two, false).unwrap();
        assert_eq!(full.flows.len(), 2);
        assert_eq!(full.requests, 2.0 * 10_000_000_000.0);
        assert_eq!(full.flows[1].2, 7.0);
        // The setup-only run stops after 1 µs of simulated time.
        let setup = m.run(&dir, "t-setup", &mqsim_default(), &two, true).unwrap();
        assert_eq!(setup.requests, 2.0 * 1_000.0);
        let medians = Medians::of(&[full.clone()], &[setup]);
        assert_eq!(medians.requests, full.requests);
        // A device MQSim refuses (here: the stand-in's geometry check).
        let mut small = mqsim_default();
        small.geometry.blocks_per_plane = 128;
        let e = m.run(&dir, "t-small", &small, &two, false).unwrap_err();
        assert!(e.contains("exit status 4"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
