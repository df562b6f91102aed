// The ns-3 side of `imp simbench`: the same dumbbell as imp's `[dumbbell]` scenario,
// N bulk TCP NewReno flows from N senders through router `left`, one bottleneck link
// and router `right` to N receivers, run for a given virtual time. Prints one JSON
// line: flows, simulated seconds, wall seconds, events, bytes received.
//
// Built against Debian's libns3-dev (3.37):
//   g++ -O2 -std=c++17 dumbbell.cc -o dumbbell $(pkg-config --cflags --libs \
//     ns3-core ns3-network ns3-internet ns3-point-to-point ns3-point-to-point-layout \
//     ns3-applications ns3-traffic-control)
// Run: ./dumbbell --flows=10 --seconds=10
//
// Settings match imp's defaults in the scenario the bench generates: MSS 1448 (MTU
// 1500 with timestamps), SACK, timestamps and window scaling on, initial window 10,
// delayed ACKs every second segment, 4 MB socket buffers; access links 1 Gbit/s, 1 ms;
// bottleneck 100 Mbit/s, 20 ms, a 500 KB drop-tail queue in the device and no
// traffic-control queue discipline in front of it (imp's link model has one queue).

#include <chrono>
#include <cstdio>

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-layout-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

using namespace ns3;

int main(int argc, char *argv[]) {
  uint32_t flows = 1;
  double seconds = 10.0;
  std::string bottleneckRate = "100Mbps";
  std::string bottleneckDelay = "20ms";
  std::string queue = "500KB";
  CommandLine cmd;
  cmd.AddValue("flows", "sender/receiver pairs", flows);
  cmd.AddValue("seconds", "simulated seconds", seconds);
  cmd.AddValue("rate", "bottleneck rate", bottleneckRate);
  cmd.AddValue("delay", "bottleneck one-way delay", bottleneckDelay);
  cmd.AddValue("queue", "bottleneck drop-tail queue", queue);
  cmd.Parse(argc, argv);

  Config::SetDefault("ns3::TcpL4Protocol::SocketType", StringValue("ns3::TcpNewReno"));
  Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
  Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(4 << 20));
  Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(4 << 20));
  Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
  Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(2));
  Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(true));

  PointToPointHelper access;
  access.SetDeviceAttribute("DataRate", StringValue("1Gbps"));
  access.SetChannelAttribute("Delay", StringValue("1ms"));
  access.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("1MB"));
  PointToPointHelper bottleneck;
  bottleneck.SetDeviceAttribute("DataRate", StringValue(bottleneckRate));
  bottleneck.SetChannelAttribute("Delay", StringValue(bottleneckDelay));
  bottleneck.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue(queue));
  PointToPointDumbbellHelper dumbbell(flows, access, flows, access, bottleneck);

  InternetStackHelper stack;
  dumbbell.InstallStack(stack);
  dumbbell.AssignIpv4Addresses(Ipv4AddressHelper("10.1.0.0", "255.255.255.0"),
                               Ipv4AddressHelper("10.2.0.0", "255.255.255.0"),
                               Ipv4AddressHelper("10.3.0.0", "255.255.255.0"));
  Ipv4GlobalRoutingHelper::PopulateRoutingTables();
  // One queue per link direction, as in imp: no queue discipline in front of devices.
  TrafficControlHelper tc;
  auto bare = [&tc](Ptr<Node> node) {
    for (uint32_t d = 0; d < node->GetNDevices(); ++d) {
      if (DynamicCast<PointToPointNetDevice>(node->GetDevice(d))) {
        tc.Uninstall(node->GetDevice(d));
      }
    }
  };
  for (uint32_t i = 0; i < flows; ++i) {
    bare(dumbbell.GetLeft(i));
    bare(dumbbell.GetRight(i));
  }
  bare(dumbbell.GetLeft());
  bare(dumbbell.GetRight());

  ApplicationContainer sinks;
  ApplicationContainer sources;
  for (uint32_t i = 0; i < flows; ++i) {
    uint16_t port = 5001 + i;
    PacketSinkHelper sink("ns3::TcpSocketFactory",
                          InetSocketAddress(Ipv4Address::GetAny(), port));
    sinks.Add(sink.Install(dumbbell.GetRight(i)));
    BulkSendHelper source("ns3::TcpSocketFactory",
                          InetSocketAddress(dumbbell.GetRightIpv4Address(i), port));
    source.SetAttribute("MaxBytes", UintegerValue(0));
    source.SetAttribute("SendSize", UintegerValue(65536));
    sources.Add(source.Install(dumbbell.GetLeft(i)));
  }
  sinks.Start(Seconds(0.0));
  sources.Start(Seconds(0.0));

  Simulator::Stop(Seconds(seconds));
  auto started = std::chrono::steady_clock::now();
  Simulator::Run();
  double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  uint64_t received = 0;
  for (uint32_t i = 0; i < sinks.GetN(); ++i) {
    received += DynamicCast<PacketSink>(sinks.Get(i))->GetTotalRx();
  }
  std::printf("{\"flows\": %u, \"sim_s\": %.3f, \"wall_s\": %.6f, \"events\": %llu, "
              "\"bytes\": %llu}\n",
              flows, seconds, wall, (unsigned long long)Simulator::GetEventCount(),
              (unsigned long long)received);
  Simulator::Destroy();
  return 0;
}
