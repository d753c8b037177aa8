/*
 * crc64.c: CRC-64/NVME (the NVM Express CRC, S3's CRC64NVME checksum):
 * reflected polynomial 0x9a6c9329ac4bc9b5 (0xad93d23594c93659 in its
 * normal form), all ones in and out; the check value, of "123456789",
 * is 0xae8b14860a799888.  A byte at a time through a table made once
 * (by the usual loop over the polynomial) and kept here as constants.
 */
#include <stddef.h>
#include <stdint.h>

#include "format.h"

static const uint64_t table[256] = {
	0x0000000000000000ull, 0x7f6ef0c830358979ull, 0xfedde190606b12f2ull,
	0x81b31158505e9b8bull, 0xc962e5739841b68full, 0xb60c15bba8743ff6ull,
	0x37bf04e3f82aa47dull, 0x48d1f42bc81f2d04ull, 0xa61cecb46814fe75ull,
	0xd9721c7c5821770cull, 0x58c10d24087fec87ull, 0x27affdec384a65feull,
	0x6f7e09c7f05548faull, 0x1010f90fc060c183ull, 0x91a3e857903e5a08ull,
	0xeecd189fa00bd371ull, 0x78e0ff3b88be6f81ull, 0x078e0ff3b88be6f8ull,
	0x863d1eabe8d57d73ull, 0xf953ee63d8e0f40aull, 0xb1821a4810ffd90eull,
	0xceecea8020ca5077ull, 0x4f5ffbd87094cbfcull, 0x30310b1040a14285ull,
	0xdefc138fe0aa91f4ull, 0xa192e347d09f188dull, 0x2021f21f80c18306ull,
	0x5f4f02d7b0f40a7full, 0x179ef6fc78eb277bull, 0x68f0063448deae02ull,
	0xe943176c18803589ull, 0x962de7a428b5bcf0ull, 0xf1c1fe77117cdf02ull,
	0x8eaf0ebf2149567bull, 0x0f1c1fe77117cdf0ull, 0x7072ef2f41224489ull,
	0x38a31b04893d698dull, 0x47cdebccb908e0f4ull, 0xc67efa94e9567b7full,
	0xb9100a5cd963f206ull, 0x57dd12c379682177ull, 0x28b3e20b495da80eull,
	0xa900f35319033385ull, 0xd66e039b2936bafcull, 0x9ebff7b0e12997f8ull,
	0xe1d10778d11c1e81ull, 0x606216208142850aull, 0x1f0ce6e8b1770c73ull,
	0x8921014c99c2b083ull, 0xf64ff184a9f739faull, 0x77fce0dcf9a9a271ull,
	0x08921014c99c2b08ull, 0x4043e43f0183060cull, 0x3f2d14f731b68f75ull,
	0xbe9e05af61e814feull, 0xc1f0f56751dd9d87ull, 0x2f3dedf8f1d64ef6ull,
	0x50531d30c1e3c78full, 0xd1e00c6891bd5c04ull, 0xae8efca0a188d57dull,
	0xe65f088b6997f879ull, 0x9931f84359a27100ull, 0x1882e91b09fcea8bull,
	0x67ec19d339c963f2ull, 0xd75adabd7a6e2d6full, 0xa8342a754a5ba416ull,
	0x29873b2d1a053f9dull, 0x56e9cbe52a30b6e4ull, 0x1e383fcee22f9be0ull,
	0x6156cf06d21a1299ull, 0xe0e5de5e82448912ull, 0x9f8b2e96b271006bull,
	0x71463609127ad31aull, 0x0e28c6c1224f5a63ull, 0x8f9bd7997211c1e8ull,
	0xf0f5275142244891ull, 0xb824d37a8a3b6595ull, 0xc74a23b2ba0eececull,
	0x46f932eaea507767ull, 0x3997c222da65fe1eull, 0xafba2586f2d042eeull,
	0xd0d4d54ec2e5cb97ull, 0x5167c41692bb501cull, 0x2e0934dea28ed965ull,
	0x66d8c0f56a91f461ull, 0x19b6303d5aa47d18ull, 0x980521650afae693ull,
	0xe76bd1ad3acf6feaull, 0x09a6c9329ac4bc9bull, 0x76c839faaaf135e2ull,
	0xf77b28a2faafae69ull, 0x8815d86aca9a2710ull, 0xc0c42c4102850a14ull,
	0xbfaadc8932b0836dull, 0x3e19cdd162ee18e6ull, 0x41773d1952db919full,
	0x269b24ca6b12f26dull, 0x59f5d4025b277b14ull, 0xd846c55a0b79e09full,
	0xa72835923b4c69e6ull, 0xeff9c1b9f35344e2ull, 0x90973171c366cd9bull,
	0x1124202993385610ull, 0x6e4ad0e1a30ddf69ull, 0x8087c87e03060c18ull,
	0xffe938b633338561ull, 0x7e5a29ee636d1eeaull, 0x0134d92653589793ull,
	0x49e52d0d9b47ba97ull, 0x368bddc5ab7233eeull, 0xb738cc9dfb2ca865ull,
	0xc8563c55cb19211cull, 0x5e7bdbf1e3ac9decull, 0x21152b39d3991495ull,
	0xa0a63a6183c78f1eull, 0xdfc8caa9b3f20667ull, 0x97193e827bed2b63ull,
	0xe877ce4a4bd8a21aull, 0x69c4df121b863991ull, 0x16aa2fda2bb3b0e8ull,
	0xf86737458bb86399ull, 0x8709c78dbb8deae0ull, 0x06bad6d5ebd3716bull,
	0x79d4261ddbe6f812ull, 0x3105d23613f9d516ull, 0x4e6b22fe23cc5c6full,
	0xcfd833a67392c7e4ull, 0xb0b6c36e43a74e9dull, 0x9a6c9329ac4bc9b5ull,
	0xe50263e19c7e40ccull, 0x64b172b9cc20db47ull, 0x1bdf8271fc15523eull,
	0x530e765a340a7f3aull, 0x2c608692043ff643ull, 0xadd397ca54616dc8ull,
	0xd2bd67026454e4b1ull, 0x3c707f9dc45f37c0ull, 0x431e8f55f46abeb9ull,
	0xc2ad9e0da4342532ull, 0xbdc36ec59401ac4bull, 0xf5129aee5c1e814full,
	0x8a7c6a266c2b0836ull, 0x0bcf7b7e3c7593bdull, 0x74a18bb60c401ac4ull,
	0xe28c6c1224f5a634ull, 0x9de29cda14c02f4dull, 0x1c518d82449eb4c6ull,
	0x633f7d4a74ab3dbfull, 0x2bee8961bcb410bbull, 0x548079a98c8199c2ull,
	0xd53368f1dcdf0249ull, 0xaa5d9839ecea8b30ull, 0x449080a64ce15841ull,
	0x3bfe706e7cd4d138ull, 0xba4d61362c8a4ab3ull, 0xc52391fe1cbfc3caull,
	0x8df265d5d4a0eeceull, 0xf29c951de49567b7ull, 0x732f8445b4cbfc3cull,
	0x0c41748d84fe7545ull, 0x6bad6d5ebd3716b7ull, 0x14c39d968d029fceull,
	0x95708ccedd5c0445ull, 0xea1e7c06ed698d3cull, 0xa2cf882d2576a038ull,
	0xdda178e515432941ull, 0x5c1269bd451db2caull, 0x237c997575283bb3ull,
	0xcdb181ead523e8c2ull, 0xb2df7122e51661bbull, 0x336c607ab548fa30ull,
	0x4c0290b2857d7349ull, 0x04d364994d625e4dull, 0x7bbd94517d57d734ull,
	0xfa0e85092d094cbfull, 0x856075c11d3cc5c6ull, 0x134d926535897936ull,
	0x6c2362ad05bcf04full, 0xed9073f555e26bc4ull, 0x92fe833d65d7e2bdull,
	0xda2f7716adc8cfb9ull, 0xa54187de9dfd46c0ull, 0x24f29686cda3dd4bull,
	0x5b9c664efd965432ull, 0xb5517ed15d9d8743ull, 0xca3f8e196da80e3aull,
	0x4b8c9f413df695b1ull, 0x34e26f890dc31cc8ull, 0x7c339ba2c5dc31ccull,
	0x035d6b6af5e9b8b5ull, 0x82ee7a32a5b7233eull, 0xfd808afa9582aa47ull,
	0x4d364994d625e4daull, 0x3258b95ce6106da3ull, 0xb3eba804b64ef628ull,
	0xcc8558cc867b7f51ull, 0x8454ace74e645255ull, 0xfb3a5c2f7e51db2cull,
	0x7a894d772e0f40a7ull, 0x05e7bdbf1e3ac9deull, 0xeb2aa520be311aafull,
	0x944455e88e0493d6ull, 0x15f744b0de5a085dull, 0x6a99b478ee6f8124ull,
	0x224840532670ac20ull, 0x5d26b09b16452559ull, 0xdc95a1c3461bbed2ull,
	0xa3fb510b762e37abull, 0x35d6b6af5e9b8b5bull, 0x4ab846676eae0222ull,
	0xcb0b573f3ef099a9ull, 0xb465a7f70ec510d0ull, 0xfcb453dcc6da3dd4ull,
	0x83daa314f6efb4adull, 0x0269b24ca6b12f26ull, 0x7d0742849684a65full,
	0x93ca5a1b368f752eull, 0xeca4aad306bafc57ull, 0x6d17bb8b56e467dcull,
	0x12794b4366d1eea5ull, 0x5aa8bf68aecec3a1ull, 0x25c64fa09efb4ad8ull,
	0xa4755ef8cea5d153ull, 0xdb1bae30fe90582aull, 0xbcf7b7e3c7593bd8ull,
	0xc399472bf76cb2a1ull, 0x422a5673a732292aull, 0x3d44a6bb9707a053ull,
	0x759552905f188d57ull, 0x0afba2586f2d042eull, 0x8b48b3003f739fa5ull,
	0xf42643c80f4616dcull, 0x1aeb5b57af4dc5adull, 0x6585ab9f9f784cd4ull,
	0xe436bac7cf26d75full, 0x9b584a0fff135e26ull, 0xd389be24370c7322ull,
	0xace74eec0739fa5bull, 0x2d545fb4576761d0ull, 0x523aaf7c6752e8a9ull,
	0xc41748d84fe75459ull, 0xbb79b8107fd2dd20ull, 0x3acaa9482f8c46abull,
	0x45a459801fb9cfd2ull, 0x0d75adabd7a6e2d6ull, 0x721b5d63e7936bafull,
	0xf3a84c3bb7cdf024ull, 0x8cc6bcf387f8795dull, 0x620ba46c27f3aa2cull,
	0x1d6554a417c62355ull, 0x9cd645fc4798b8deull, 0xe3b8b53477ad31a7ull,
	0xab69411fbfb21ca3ull, 0xd407b1d78f8795daull, 0x55b4a08fdfd90e51ull,
	0x2ada5047efec8728ull,
};

uint64_t stfs_crc64nvme(uint64_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	crc = ~crc;
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}
