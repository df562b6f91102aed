// The ns-3 side of `imp-bench`'s W8 simulator row: the transfer `imp ttcp` simulates
// by default, one TCP NewReno bulk transfer of BYTES over one point-to-point link
// (100 Mbit/s, 10 ms each way, so a 20 ms round trip, a drop-tail queue of twice the
// bandwidth-delay product: 500 KB), run until the receiver has every byte. Prints one
// JSON line: bytes received, simulated seconds of the transfer, wall seconds.
//
// Built by the bench (cached in the temporary directory) against Debian's libns3-dev:
//   g++ -O2 -std=c++17 ttcp.cc -o ttcp -lns3-point-to-point -lns3-applications \
//     -lns3-internet -lns3-traffic-control -lns3-network -lns3-core
// Run: ./ttcp --bytes=104857600
//
// Settings match imp ttcp's: MSS 1448 (MTU 1500 with timestamps), SACK, timestamps and
// window scaling on, initial window 10, delayed ACKs every second segment, 4 MB socket
// buffers, 8 KB application writes, no queue discipline in front of the device.

#include <chrono>
#include <cstdio>

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

using namespace ns3;

namespace {
uint64_t wanted = 0;
uint64_t received = 0;
double done_at = -1.0;

void OnRx(Ptr<const Packet> packet, const Address &) {
  received += packet->GetSize();
  if (done_at < 0 && received >= wanted) {
    done_at = Simulator::Now().GetSeconds();
    Simulator::Stop();
  }
}
}  // namespace

int main(int argc, char *argv[]) {
  uint64_t bytes = 100 << 20;
  std::string rate = "100Mbps";
  std::string delay = "10ms";
  std::string queue = "500000B";
  CommandLine cmd;
  cmd.AddValue("bytes", "bytes to transfer", bytes);
  cmd.AddValue("rate", "link rate", rate);
  cmd.AddValue("delay", "one-way delay", delay);
  cmd.AddValue("queue", "drop-tail queue of the link", queue);
  cmd.Parse(argc, argv);
  wanted = bytes;

  Config::SetDefault("ns3::TcpL4Protocol::SocketType", StringValue("ns3::TcpNewReno"));
  Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
  Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(4 << 20));
  Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(4 << 20));
  Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
  Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(2));
  Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(true));

  NodeContainer nodes;
  nodes.Create(2);
  PointToPointHelper link;
  link.SetDeviceAttribute("DataRate", StringValue(rate));
  link.SetChannelAttribute("Delay", StringValue(delay));
  link.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue(queue));
  NetDeviceContainer devices = link.Install(nodes);
  InternetStackHelper stack;
  stack.Install(nodes);
  Ipv4AddressHelper addresses("10.1.1.0", "255.255.255.0");
  Ipv4InterfaceContainer ifaces = addresses.Assign(devices);
  // One queue per direction, as in imp's link model: no queue discipline (assigning
  // addresses installed the default one).
  TrafficControlHelper tc;
  tc.Uninstall(devices);

  uint16_t port = 5001;
  PacketSinkHelper sink("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
  ApplicationContainer sinks = sink.Install(nodes.Get(1));
  sinks.Get(0)->TraceConnectWithoutContext("Rx", MakeCallback(&OnRx));
  BulkSendHelper source("ns3::TcpSocketFactory", InetSocketAddress(ifaces.GetAddress(1), port));
  source.SetAttribute("MaxBytes", UintegerValue(bytes));
  source.SetAttribute("SendSize", UintegerValue(8192));
  ApplicationContainer sources = source.Install(nodes.Get(0));
  sinks.Start(Seconds(0.0));
  sources.Start(Seconds(0.0));

  Simulator::Stop(Seconds(3600.0));
  auto started = std::chrono::steady_clock::now();
  Simulator::Run();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("{\"bytes\": %llu, \"sim_s\": %.6f, \"wall_s\": %.6f, \"events\": %llu}\n",
              (unsigned long long)received, done_at, wall,
              (unsigned long long)Simulator::GetEventCount());
  Simulator::Destroy();
  return done_at < 0 ? 1 : 0;
}
