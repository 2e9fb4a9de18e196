//! The test bed's generator frame (demo, compare). At the bottom with [`crate::tools`]: uses no
//! other module of the lab.

use fastpath::netdev::NetDev;
use fastpath::packet::{build_udp_frame, UdpFrameSpec};

/// The test-bed generator frame: 64-byte UDP from `dev` (ns a, 10.99.0.1:9000) to the receiving
/// veth (`dst_mac`, 10.99.0.2:9), checksums correct.
///
/// # Errors
///
/// Reading `dev`'s MAC address failed.
pub fn testbed_frame(dev: &NetDev, dst_mac: [u8; 6]) -> Result<Vec<u8>, fastpath::SysError> {
    Ok(testbed_udp_frame(dev.mac()?, dst_mac))
}

/// The same 64-byte UDP frame (10.99.0.1:9000 -> 10.99.0.2:9, checksums correct) between MAC
/// addresses the caller knows.
pub fn testbed_udp_frame(src_mac: [u8; 6], dst_mac: [u8; 6]) -> Vec<u8> {
    let spec = UdpFrameSpec {
        src_mac,
        dst_mac,
        src_ip: fastpath_testbed::IP4_A.into(),
        dst_ip: fastpath_testbed::IP4_B.into(),
        src_port: 9000,
        dst_port: 9,
        frame_len: 64,
    };
    let mut frame = vec![0u8; 64];
    build_udp_frame(&spec, &mut frame);
    frame
}
